//! Histograms: observations counted in buckets, plus their sum.

use std::sync::Arc;

use crate::error::ClientError;
use crate::series::Series;
use crate::timer::Timer;
use crate::validate;

/// Python's `Histogram.DEFAULT_BUCKETS`, `+Inf` included.
pub const DEFAULT_BUCKETS: [f64; 15] = [
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    f64::INFINITY,
];

/// A histogram (one child, or a plain histogram without labels).
///
/// Stored as `<name>_sum`, then one `<name>_bucket` entry per upper bound
/// (label `le`, `+Inf` last) holding the count of observations that fell in
/// that bucket only: the file is not cumulative, and has no `_count` entry;
/// the collector accumulates, as Python's does.
#[derive(Clone)]
pub struct Histogram {
    series: Arc<Series>,
}

impl Histogram {
    /// Records one observation: adds it to the sum, and 1 to the first
    /// bucket whose bound is `>=` it (none for NaN, as in Python).
    #[inline]
    pub fn observe(&self, amount: f64) {
        self.count_in_bucket(amount);
    }

    /// Records one observation, as [`Histogram::observe`], and attaches an
    /// exemplar to the bucket it fell in (the `_bucket` entry of the first
    /// bound `>=` it): `prometheus_client`'s `Histogram.observe(amount,
    /// exemplar)`. The exemplar holds `amount` and the current time, and
    /// replaces that bucket's previous one. An empty `exemplar` stores
    /// none, and neither does NaN (it falls in no bucket).
    ///
    /// Labels Python refuses (a name outside `[a-zA-Z_][a-zA-Z0-9_]*` or
    /// starting with `__`, a name twice, names and values together over 128
    /// code points) are an error; the observation is still recorded, as in
    /// Python.
    ///
    /// The exemplar goes into this process's exemplar file (see the crate
    /// docs), opened on the first exemplar; a failure to store it is printed
    /// once and never affects the observation.
    pub fn observe_with_exemplar(
        &self,
        amount: f64,
        exemplar: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let bucket = self.count_in_bucket(amount);
        if exemplar.is_empty() {
            return Ok(());
        }
        validate::exemplar_labels(&self.series.definition().family, exemplar)?;
        if let Some(bucket) = bucket {
            self.series.store_exemplar(1 + bucket, exemplar, amount);
        }
        Ok(())
    }

    /// Adds `amount` to the sum and 1 to its bucket; returns the bucket's
    /// index among the bounds (`None` for NaN).
    #[inline]
    fn count_in_bucket(&self, amount: f64) -> Option<usize> {
        let bounds = &self.series.definition().buckets;
        // First bound with amount <= bound; for NaN no bound qualifies.
        let index = bounds.partition_point(|&bound| bound < amount);
        let hit = bounds.get(index).is_some_and(|&bound| amount <= bound);
        self.series.with(|slots| {
            if let Some(sum) = slots.first() {
                sum.add(amount);
            }
            if hit {
                if let Some(bucket) = slots.get(1 + index) {
                    bucket.add(1.0);
                }
            }
        });
        hit.then_some(index)
    }

    /// Starts a timer that observes the elapsed seconds when dropped (or
    /// when [`Timer::observe_duration`] is called).
    #[must_use = "the duration is observed when the timer is dropped"]
    pub fn start_timer(&self) -> Timer<'_> {
        Timer::histogram(self)
    }

    /// The upper bounds, `+Inf` last.
    #[must_use]
    pub fn upper_bounds(&self) -> &[f64] {
        &self.series.definition().buckets
    }

    /// Sum of observations in this process.
    #[must_use]
    pub fn sum(&self) -> f64 {
        self.series.get(0)
    }

    /// Per-bucket counts in this process (not cumulative), in bound order.
    #[must_use]
    pub fn bucket_counts(&self) -> Vec<f64> {
        self.series
            .with(|slots| slots.iter().skip(1).map(|s| s.get()).collect())
            .unwrap_or_default()
    }

    /// Number of observations in this process (the sum of the buckets).
    #[must_use]
    pub fn count(&self) -> f64 {
        self.bucket_counts().iter().sum()
    }
}

crate::handle_impls!(Histogram);
