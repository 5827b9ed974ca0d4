//! Counters: values that only go up.

use std::sync::Arc;

use crate::error::ClientError;
use crate::series::Series;
use crate::validate;

/// A counter (one child, or a plain counter without labels).
///
/// Stored as the single entry `<name>_total`, where `<name>` is the
/// registered name with any `_total` suffix removed (Python's rule).
/// Cloning is cheap (one reference count); clones update the same value.
#[derive(Clone)]
pub struct Counter {
    series: Arc<Series>,
}

impl Counter {
    /// Adds 1.
    #[inline]
    pub fn inc(&self) {
        self.series.add(0, 1.0);
    }

    /// Adds `amount`. Refuses a negative amount, as Python does (NaN is
    /// accepted, as in Python, and makes the counter NaN).
    #[inline]
    pub fn inc_by(&self, amount: f64) -> Result<(), ClientError> {
        if amount < 0.0 {
            return Err(ClientError::NegativeIncrement {
                metric: self.series.definition().family.clone(),
                amount,
            });
        }
        self.series.add(0, amount);
        Ok(())
    }

    /// Adds `amount` and attaches an exemplar to the counter (the labels
    /// of, say, the trace that caused it): `prometheus_client`'s
    /// `Counter.inc(amount, exemplar)`. The exemplar holds `amount` and the
    /// current time, and replaces the counter's previous one. An empty
    /// `exemplar` stores none, as Python's empty dict.
    ///
    /// Errors, as in Python: a negative amount (nothing is counted), and
    /// labels Python refuses (a name outside `[a-zA-Z_][a-zA-Z0-9_]*` or
    /// starting with `__`, a name twice, names and values together over 128
    /// code points): then the amount is still counted and only the exemplar
    /// is refused.
    ///
    /// The exemplar goes into this process's exemplar file (see the crate
    /// docs), opened on the first exemplar; a failure to store it is printed
    /// once and never affects the count.
    pub fn inc_with_exemplar(
        &self,
        amount: f64,
        exemplar: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        self.inc_by(amount)?;
        if exemplar.is_empty() {
            return Ok(());
        }
        validate::exemplar_labels(&self.series.definition().family, exemplar)?;
        self.series.store_exemplar(0, exemplar, amount);
        Ok(())
    }

    /// Sets the counter back to 0, for a logical restart within one
    /// process (Python's `Counter.reset`).
    pub fn reset(&self) {
        self.series.set(0, 0.0);
    }

    /// This process's value.
    #[must_use]
    pub fn get(&self) -> f64 {
        self.series.get(0)
    }
}

crate::handle_impls!(Counter);
