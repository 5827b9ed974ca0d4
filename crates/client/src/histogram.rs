//! Histograms: observations counted in buckets, plus their sum.

use std::sync::Arc;

use crate::series::Series;
use crate::timer::Timer;

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
