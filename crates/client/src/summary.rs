//! Summaries: count and sum of observations (no quantiles, as in Python's
//! multiprocess mode).

use std::sync::Arc;

use crate::series::Series;
use crate::timer::Timer;

/// A summary (one child, or a plain summary without labels).
///
/// Stored as the entries `<name>_count` and `<name>_sum`, in that order.
#[derive(Clone)]
pub struct Summary {
    series: Arc<Series>,
}

impl Summary {
    /// Records one observation.
    #[inline]
    pub fn observe(&self, amount: f64) {
        self.series.with(|slots| {
            if let [count, sum] = slots {
                count.add(1.0);
                sum.add(amount);
            }
        });
    }

    /// Starts a timer that observes the elapsed seconds when dropped (or
    /// when [`Timer::observe_duration`] is called).
    #[must_use = "the duration is observed when the timer is dropped"]
    pub fn start_timer(&self) -> Timer<'_> {
        Timer::summary(self)
    }

    /// Number of observations in this process.
    #[must_use]
    pub fn count(&self) -> f64 {
        self.series.get(0)
    }

    /// Sum of observations in this process.
    #[must_use]
    pub fn sum(&self) -> f64 {
        self.series.get(1)
    }
}

crate::handle_impls!(Summary);
