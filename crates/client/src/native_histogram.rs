//! Native histograms: Prometheus's sparse exponential buckets, recorded
//! beside a classic part that every `prometheus_client` reader understands.

use std::sync::Arc;

use crate::definition::Definition;
use crate::directory_writer::{Creator, DirectoryWriter};
use crate::error::ClientError;
use crate::family::sealed::Member;
use crate::native_recorder::NativeRecorder;
use crate::series::Series;
use crate::timer::Timer;
use crate::Histogram;

/// A native histogram (one child, or a plain one without labels).
///
/// Every observation is recorded twice:
///
/// * natively, in this process's `native-histograms/histogram_<id>.native`
///   (layout: [`multiprom_format::native_file`]), keyed
///   `[name, name, labels, help]`: exponential buckets at the options'
///   schema, lowered when a series would hold more than `max_buckets`;
///   multiprom's collector merges the processes' series and serves them in
///   the Prometheus protobuf format;
/// * classically, in `histogram_<id>.db` exactly as a [`Histogram`] with the
///   options' classic buckets writes it, or, native-only, with the single
///   bucket `le="+Inf"` and the sum. Python's collector, and multiprom's
///   text outputs, show that part (for a native-only histogram: `_count`,
///   `_sum` and one `+Inf` bucket, as client_golang's text output does).
///
/// ```
/// use multiprom_client::{MultiprocessRegistry, NativeHistogramOptions};
/// use multiprom_format::native_file::native_histogram_path;
/// use multiprom_format::{read_native_histogram_file, FileName};
///
/// let dir = tempfile::tempdir()?;
/// let registry = MultiprocessRegistry::new(dir.path())?;
/// let latency = registry.native_histogram_family(
///     "latency_seconds",
///     "Latency.",
///     NativeHistogramOptions::default(), // schema 3, native only
///     &["route"],
/// )?;
/// let root = latency.labels(&["/"])?;
/// for seconds in [0.25, 0.26, 1.0, 3.0] {
///     root.observe(seconds);
/// }
///
/// let db: FileName = format!("histogram_{}.db", std::process::id()).parse()?;
/// let file = read_native_histogram_file(&native_histogram_path(dir.path(), &db))?;
/// let series = &file.entries[0];
/// assert_eq!(series.raw_key, r#"["latency_seconds", "latency_seconds", {"route": "/"}, "Latency."]"#);
/// let native = &series.histogram;
/// assert_eq!((native.schema, native.count(), native.sum), (3, 4, 4.51));
/// // At schema 3, bucket i is (2^((i-1)/8), 2^(i/8)]: 0.25 is -16's
/// // upper bound, 0.26 falls in -15, 1.0 is 0's bound, 3.0 falls in 13.
/// assert_eq!(native.positive, [(-16, 1), (-15, 1), (0, 1), (13, 1)]);
///
/// // The classic part: one +Inf bucket and the sum.
/// assert_eq!(root.upper_bounds(), [f64::INFINITY]);
/// assert_eq!((root.count(), root.sum()), (4.0, 4.51));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct NativeHistogram {
    classic: Histogram,
    native: Arc<NativeRecorder>,
}

impl NativeHistogram {
    /// Records one observation, natively and in the classic part (see
    /// [`Histogram::observe`]). NaN counts natively as NaN, classically in
    /// no bucket; both sums become NaN.
    #[inline]
    pub fn observe(&self, amount: f64) {
        self.classic.observe(amount);
        self.native.observe(amount);
    }

    /// Records one observation as [`NativeHistogram::observe`], and attaches
    /// an exemplar to the classic bucket it fell in, as
    /// [`Histogram::observe_with_exemplar`] does (same rules, same errors;
    /// the observation is recorded even when the exemplar is refused).
    pub fn observe_with_exemplar(
        &self,
        amount: f64,
        exemplar: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let stored = self.classic.observe_with_exemplar(amount, exemplar);
        self.native.observe(amount);
        stored
    }

    /// Starts a timer that observes the elapsed seconds when dropped (or
    /// when [`Timer::observe_duration`] is called).
    #[must_use = "the duration is observed when the timer is dropped"]
    pub fn start_timer(&self) -> Timer<'_> {
        Timer::native_histogram(self)
    }

    /// What this process has recorded natively. `None` only in a forked
    /// child whose own native file could not be created.
    #[must_use]
    pub fn native(&self) -> Option<multiprom_format::NativeHistogram> {
        self.native.snapshot()
    }

    /// The classic upper bounds, `+Inf` last (`+Inf` alone: native only).
    #[must_use]
    pub fn upper_bounds(&self) -> &[f64] {
        self.classic.upper_bounds()
    }

    /// Sum of observations in this process (the classic part's).
    #[must_use]
    pub fn sum(&self) -> f64 {
        self.classic.sum()
    }

    /// Per-classic-bucket counts in this process (not cumulative).
    #[must_use]
    pub fn bucket_counts(&self) -> Vec<f64> {
        self.classic.bucket_counts()
    }

    /// Number of observations in this process, NaN excluded (the classic
    /// part's; the native count includes NaN observations).
    #[must_use]
    pub fn count(&self) -> f64 {
        self.classic.count()
    }
}

impl Member for NativeHistogram {
    fn create(
        writer: &Arc<DirectoryWriter>,
        definition: &Arc<Definition>,
        label_values: &[&str],
        creator: &mut Creator<'_>,
    ) -> Result<Self, ClientError> {
        // Only native histogram definitions are registered for this type.
        let config = definition.native.unwrap_or_default();
        let key: Arc<str> = definition.native_key(label_values).into();
        // Native first: if its file cannot be made, no classic entry is left
        // behind for a metric that was refused.
        let series = creator.native_series(&key, config)?;
        let native = NativeRecorder::new(Arc::clone(writer), key, config, series);
        let classic = Histogram::create(writer, definition, label_values, creator)?;
        Ok(NativeHistogram {
            classic,
            native: Arc::new(native),
        })
    }

    fn series(&self) -> &Arc<Series> {
        self.classic.series()
    }
}

impl crate::Metric for NativeHistogram {}

impl std::fmt::Debug for NativeHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeHistogram")
            .field("classic", self.classic.series())
            .field("native", &self.native)
            .finish()
    }
}
