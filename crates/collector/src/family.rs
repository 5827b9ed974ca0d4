//! The merged data model: what the merge produces and the encoders consume.

use std::fmt;
use std::sync::Arc;

use multiprom_format::{Exemplar, GaugeMode};

/// A metric type as it appears in `# TYPE` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FamilyType {
    /// `counter`
    Counter,
    /// `gauge`
    Gauge,
    /// `histogram`
    Histogram,
    /// `summary`
    Summary,
}

impl FamilyType {
    /// The type name in exposition formats.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            FamilyType::Counter => "counter",
            FamilyType::Gauge => "gauge",
            FamilyType::Histogram => "histogram",
            FamilyType::Summary => "summary",
        }
    }
}

impl fmt::Display for FamilyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Label pairs of one sample, sorted by name, names unique (as a Python
/// `dict` sorted for exposition).
pub type LabelSet = Arc<[(Arc<str>, Arc<str>)]>;

/// One merged sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedSample {
    /// Sample name, e.g. `requests_total`, `latency_bucket`.
    pub name: Arc<str>,
    /// Labels, sorted by name.
    pub labels: LabelSet,
    /// The merged value.
    pub value: f64,
    /// The exemplar with the latest timestamp among the files merged into
    /// this sample, for a counter's `_total` and a histogram's `_bucket`
    /// samples (where OpenMetrics allows one). Only OpenMetrics prints it.
    pub exemplar: Option<Arc<Exemplar>>,
}

/// One merged metric family, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedFamily {
    /// Family name (for counters, without `_total`).
    pub name: Arc<str>,
    /// Help text.
    pub help: Arc<str>,
    /// Metric type.
    pub family_type: FamilyType,
    /// For gauges, the mode the samples were merged with.
    pub gauge_mode: Option<GaugeMode>,
    /// Samples in output order.
    pub samples: Vec<MergedSample>,
}
