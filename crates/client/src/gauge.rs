//! Gauges: values that go up and down, merged across processes by their
//! [`GaugeMode`].

use std::sync::Arc;

use multiprom_format::GaugeMode;

use crate::clock::unix_time;
use crate::series::Series;

/// A gauge in one of the eight modes that allow `inc`/`dec` (every mode but
/// `mostrecent` and `livemostrecent`; those are [`MostRecentGauge`]).
///
/// Stored as the single entry `<name>` in `gauge_<mode>_<id>.db`.
#[derive(Clone)]
pub struct Gauge {
    series: Arc<Series>,
}

impl Gauge {
    /// Adds 1.
    #[inline]
    pub fn inc(&self) {
        self.series.add(0, 1.0);
    }

    /// Subtracts 1.
    #[inline]
    pub fn dec(&self) {
        self.series.add(0, -1.0);
    }

    /// Adds `amount` (which may be negative).
    #[inline]
    pub fn inc_by(&self, amount: f64) {
        self.series.add(0, amount);
    }

    /// Subtracts `amount`.
    #[inline]
    pub fn dec_by(&self, amount: f64) {
        self.series.add(0, -amount);
    }

    /// Sets the value.
    #[inline]
    pub fn set(&self, value: f64) {
        self.series.set(0, value);
    }

    /// Sets the value to the current Unix time in seconds.
    pub fn set_to_current_time(&self) {
        self.set(unix_time());
    }

    /// Increments now and decrements when the returned guard is dropped
    /// (Python's `track_inprogress`).
    #[must_use = "the gauge is decremented when the guard is dropped"]
    pub fn track_inprogress(&self) -> InProgress<'_> {
        self.inc();
        InProgress { gauge: self }
    }

    /// This process's value.
    #[must_use]
    pub fn get(&self) -> f64 {
        self.series.get(0)
    }

    /// The gauge's mode.
    #[must_use]
    pub fn mode(&self) -> GaugeMode {
        mode_of(&self.series)
    }
}

/// Decrements its gauge when dropped; see [`Gauge::track_inprogress`].
#[derive(Debug)]
pub struct InProgress<'a> {
    gauge: &'a Gauge,
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// A gauge in mode `mostrecent` or `livemostrecent`: the merged value is the
/// one set most recently by any process, so it can only be set (Python
/// raises on `inc`/`dec`; here they do not exist). Every `set` stores the
/// wall-clock time beside the value, as Python does.
#[derive(Clone)]
pub struct MostRecentGauge {
    series: Arc<Series>,
}

impl MostRecentGauge {
    /// Sets the value, stamped with the current Unix time.
    #[inline]
    pub fn set(&self, value: f64) {
        self.set_with_timestamp(value, unix_time());
    }

    /// Sets the value with an explicit timestamp (Unix seconds). The merge
    /// keeps the value with the greatest timestamp; 0.0 means "never set".
    pub fn set_with_timestamp(&self, value: f64, timestamp: f64) {
        self.series.with(|slots| {
            if let Some(slot) = slots.first() {
                slot.set_with_timestamp(value, timestamp);
            }
        });
    }

    /// Sets the value to the current Unix time in seconds.
    pub fn set_to_current_time(&self) {
        let now = unix_time();
        self.set_with_timestamp(now, now);
    }

    /// This process's value.
    #[must_use]
    pub fn get(&self) -> f64 {
        self.series.get(0)
    }

    /// The timestamp of this process's last `set` (0.0 if never set).
    #[must_use]
    pub fn timestamp(&self) -> f64 {
        self.series
            .with(|slots| slots.first().map_or(f64::NAN, |s| s.timestamp()))
            .unwrap_or(f64::NAN)
    }

    /// The gauge's mode.
    #[must_use]
    pub fn mode(&self) -> GaugeMode {
        mode_of(&self.series)
    }
}

fn mode_of(series: &Series) -> GaugeMode {
    series
        .definition()
        .kind
        .gauge_mode()
        .unwrap_or(GaugeMode::All)
}

crate::handle_impls!(Gauge, MostRecentGauge);
