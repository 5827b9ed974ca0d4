//! Observing durations.

use std::time::Instant;

use crate::{Histogram, NativeHistogram, Summary};

/// What a [`Timer`] observes into.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Histogram(&'a Histogram),
    NativeHistogram(&'a NativeHistogram),
    Summary(&'a Summary),
}

/// Observes the seconds since it was started when dropped, like Python's
/// `Histogram.time()` and `Summary.time()`.
#[derive(Debug)]
pub struct Timer<'a> {
    target: Option<Target<'a>>,
    start: Instant,
}

impl<'a> Timer<'a> {
    pub(crate) fn histogram(histogram: &'a Histogram) -> Timer<'a> {
        Timer {
            target: Some(Target::Histogram(histogram)),
            start: Instant::now(),
        }
    }

    pub(crate) fn native_histogram(histogram: &'a NativeHistogram) -> Timer<'a> {
        Timer {
            target: Some(Target::NativeHistogram(histogram)),
            start: Instant::now(),
        }
    }

    pub(crate) fn summary(summary: &'a Summary) -> Timer<'a> {
        Timer {
            target: Some(Target::Summary(summary)),
            start: Instant::now(),
        }
    }

    /// Observes the elapsed time now and returns it in seconds.
    pub fn observe_duration(mut self) -> f64 {
        self.finish()
    }

    /// Drops the timer without observing anything.
    pub fn stop_and_discard(mut self) {
        self.target = None;
    }

    fn finish(&mut self) -> f64 {
        let seconds = self.start.elapsed().as_secs_f64();
        match self.target.take() {
            Some(Target::Histogram(h)) => h.observe(seconds),
            Some(Target::NativeHistogram(h)) => h.observe(seconds),
            Some(Target::Summary(s)) => s.observe(seconds),
            None => {}
        }
        seconds
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}
