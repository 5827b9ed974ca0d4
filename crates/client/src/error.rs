//! The one error type of this crate.

use std::io;
use std::path::PathBuf;

use multiprom_format::{
    EnvDirError, ExemplarError, FileNameError, GaugeMode, ProcessFileError, WriteError, DIR_ENV_VAR,
};

/// Why histogram buckets were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BucketsError {
    /// A bound is NaN.
    #[error("a bucket bound is NaN")]
    NaN,
    /// The bounds are not in ascending order (Python refuses rather than sorts).
    #[error("buckets not in sorted order")]
    NotSorted,
    /// A bound appears twice: both buckets would have the same `le` label.
    #[error("a bucket bound appears twice")]
    Duplicate,
    /// Fewer than two buckets after `+Inf` is appended.
    #[error("must have at least two buckets (+Inf included)")]
    TooFew,
}

/// Why native histogram options were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NativeOptionsError {
    /// The schema is outside the range Prometheus accepts.
    #[error("schema outside -4..=8")]
    Schema,
    /// `max_buckets` is 0 or more than a record can hold.
    #[error("max_buckets outside 1..=65536")]
    MaxBuckets,
    /// The zero threshold is negative, infinite or NaN.
    #[error("zero_threshold must be finite and not negative")]
    ZeroThreshold,
}

/// Everything that can go wrong in this crate.
///
/// Errors come from the calls that create a registry, a metric or a labelled
/// child, from [`crate::Counter::inc_by`] with a negative amount, and from
/// the `*_with_exemplar` updates with labels `prometheus_client` would
/// refuse; value updates on existing handles never fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The environment names no directory (neither `PROMETHEUS_MULTIPROC_DIR`
    /// nor the legacy `prometheus_multiproc_dir` is set, or the one that
    /// decides is empty), and none was given.
    #[error("no metrics directory: {0}; set {DIR_ENV_VAR} or pass one to MultiprocessRegistry::builder().dir(..)")]
    NoDirectory(#[from] EnvDirError),
    /// The directory does not exist, is not a directory or cannot be read.
    #[error("metrics directory {}: {source}", path.display())]
    Directory {
        /// The directory as configured.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// The process identifier cannot be part of a file name that Python
    /// reads back correctly.
    #[error("invalid process identifier: {0}")]
    InvalidProcessId(#[source] FileNameError),
    /// `pthread_atfork` failed, so forks could not be detected.
    #[error("cannot watch for fork(): {0}")]
    ForkDetection(#[source] io::Error),
    /// A metric name outside `[a-zA-Z_:][a-zA-Z0-9_:]*` (or empty).
    #[error("invalid metric name {name:?}: must match [a-zA-Z_:][a-zA-Z0-9_:]* and not be empty")]
    InvalidMetricName {
        /// The name (after a counter's `_total` was stripped).
        name: String,
    },
    /// A label name outside `[a-zA-Z_][a-zA-Z0-9_]*`.
    #[error("metric {metric}: invalid label name {label:?}: must match [a-zA-Z_][a-zA-Z0-9_]*")]
    InvalidLabelName {
        /// The metric.
        metric: String,
        /// The label name.
        label: String,
    },
    /// A label name reserved for Prometheus or for this metric type.
    #[error("metric {metric}: label name {label:?} is reserved: {reason}")]
    ReservedLabelName {
        /// The metric.
        metric: String,
        /// The label name.
        label: String,
        /// Why it is reserved.
        reason: &'static str,
    },
    /// The same label name twice in one metric.
    #[error("metric {metric}: label name {label:?} appears twice")]
    DuplicateLabelName {
        /// The metric.
        metric: String,
        /// The label name.
        label: String,
    },
    /// A labelled family without label names.
    #[error(
        "metric {metric}: a family needs at least one label name (use the plain metric instead)"
    )]
    NoLabelNames {
        /// The metric.
        metric: String,
    },
    /// A child requested with the wrong number of label values.
    #[error("metric {metric}: expected {expected} label values, got {got}")]
    LabelCount {
        /// The metric.
        metric: String,
        /// Number of label names.
        expected: usize,
        /// Number of values given.
        got: usize,
    },
    /// Histogram buckets that Python would refuse (or that would collide).
    #[error("histogram {metric}: {reason}")]
    InvalidBuckets {
        /// The metric.
        metric: String,
        /// What is wrong with them.
        reason: BucketsError,
    },
    /// Native histogram options outside what Prometheus accepts.
    #[error("native histogram {metric}: {reason}")]
    InvalidNativeOptions {
        /// The metric.
        metric: String,
        /// What is wrong with them.
        reason: NativeOptionsError,
    },
    /// A gauge mode that does not fit the gauge type asked for.
    #[error("gauge {metric}: mode {mode} {reason}")]
    WrongGaugeMode {
        /// The metric.
        metric: String,
        /// The mode given.
        mode: GaugeMode,
        /// What to use instead.
        reason: &'static str,
    },
    /// The name is already registered with a different definition.
    #[error(
        "metric {name} is already registered as {existing}; cannot register it as {requested}"
    )]
    Conflict {
        /// The family name.
        name: String,
        /// The existing definition.
        existing: String,
        /// The refused definition.
        requested: String,
    },
    /// One of the sample names this metric would expose is already exposed
    /// by another metric (e.g. a gauge `x_total` beside a counter `x`).
    #[error("metric {name} would expose {sample}, which metric {other} already exposes")]
    NameClash {
        /// The refused family.
        name: String,
        /// The clashing sample name.
        sample: String,
        /// The registered family that exposes it.
        other: String,
    },
    /// A counter was asked to go down.
    #[error(
        "counter {metric}: counters can only be incremented by non-negative amounts, got {amount}"
    )]
    NegativeIncrement {
        /// The metric.
        metric: String,
        /// The refused amount.
        amount: f64,
    },
    /// Exemplar labels that `prometheus_client` would refuse (bad label
    /// names are [`ClientError::InvalidLabelName`],
    /// [`ClientError::ReservedLabelName`] and
    /// [`ClientError::DuplicateLabelName`]).
    #[error("metric {metric}: exemplar refused: {reason}")]
    InvalidExemplar {
        /// The metric.
        metric: String,
        /// What is wrong with the labels.
        reason: ExemplarError,
    },
    /// A file could not be created, opened, grown or written (directory
    /// missing, permission denied, disk full, a corrupt existing file that
    /// could not be moved aside).
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl From<ProcessFileError> for ClientError {
    fn from(error: ProcessFileError) -> Self {
        match error {
            ProcessFileError::BadIdentifier(error) => ClientError::InvalidProcessId(error),
            ProcessFileError::Write(error) => ClientError::Write(error),
        }
    }
}
