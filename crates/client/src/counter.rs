//! Counters: values that only go up.

use std::sync::Arc;

use crate::error::ClientError;
use crate::series::Series;

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
