//! [`Format`]: which exposition, its `Content-Type`, and its encoder.

use super::names::Escaping;
use super::sample_lines::Fresh;
use super::{openmetrics, prometheus};
use crate::family::MergedFamily;

/// `Content-Type` of Prometheus text format 0.0.4.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// `Content-Type` of OpenMetrics 1.0.0.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Format {
    /// Prometheus text format 0.0.4.
    #[default]
    Prometheus,
    /// OpenMetrics 1.0.0.
    OpenMetrics,
}

impl Format {
    /// Whether this format shows exemplars (OpenMetrics only): a
    /// collection for the others need not attach them
    /// ([`crate::Exemplars::Skip`]).
    #[must_use]
    pub const fn shows_exemplars(self) -> bool {
        matches!(self, Format::OpenMetrics)
    }

    /// The HTTP `Content-Type` of this format.
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }

    /// Appends `families` in this format to `out`, as `prometheus_client`'s
    /// `generate_latest` (or `openmetrics.exposition.generate_latest`)
    /// writes them, names escaped with `underscores`. OpenMetrics output
    /// ends with `# EOF`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use multiprom_collector::{FamilyType, Format, MergedFamily, MergedSample};
    /// let family = MergedFamily {
    ///     name: "requests".into(),
    ///     help: "Requests \\ served\nby \"us\"".into(),
    ///     family_type: FamilyType::Counter,
    ///     gauge_mode: None,
    ///     samples: vec![MergedSample {
    ///         name: "requests_total".into(),
    ///         labels: Arc::from([("code".into(), "2\"00".into())]),
    ///         value: 1234567.0,
    ///         exemplar: None,
    ///     }],
    /// };
    /// let mut out = String::new();
    /// Format::Prometheus.encode(std::slice::from_ref(&family), &mut out);
    /// assert_eq!(out, "# HELP requests_total Requests \\\\ served\\nby \"us\"\n\
    ///                  ## TYPE requests_total counter\n\
    ///                  requests_total{code=\"2\\\"00\"} 1.234567e+06\n");
    ///
    /// // OpenMetrics, with Python's quirks: HELP escapes `"` too.
    /// let mut out = String::new();
    /// Format::OpenMetrics.encode(&[family], &mut out);
    /// assert_eq!(out, "# HELP requests Requests \\\\ served\\nby \\\"us\\\"\n\
    ///                  ## TYPE requests counter\n\
    ///                  requests_total{code=\"2\\\"00\"} 1.234567e+06\n\
    ///                  ## EOF\n");
    /// ```
    pub fn encode(self, families: &[MergedFamily], out: &mut String) {
        self.encode_all(&[families], Escaping::Underscores, out);
    }

    /// Appends the families of every list of `lists`, one list after the
    /// other, in this format to `out` as one body, names escaped as
    /// `escaping` says: OpenMetrics output ends with one `# EOF`, after the
    /// last list. See [`super::Body`] for a body whose lists come one at a
    /// time.
    ///
    /// `escaping` is the scheme given to `prometheus_client`'s
    /// `generate_latest(registry, escaping)`: `allow-utf-8` keeps a `:` in
    /// OpenMetrics sample names and quotes a name that is not a legacy
    /// one (text format 1.0.0 for Prometheus text).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use multiprom_collector::{Escaping, FamilyType, Format, MergedFamily, MergedSample};
    /// let gauge = |name: &str| MergedFamily {
    ///     name: name.into(),
    ///     help: "Waiting.".into(),
    ///     family_type: FamilyType::Gauge,
    ///     gauge_mode: None,
    ///     samples: vec![MergedSample {
    ///         name: name.into(),
    ///         labels: Arc::from([("model.name".into(), "m".into())]),
    ///         value: 2.0,
    ///         exemplar: None,
    ///     }],
    /// };
    /// let merged = vec![gauge("vllm:waiting")];
    /// let own = vec![gauge("caf\u{e9}")];
    /// let mut out = String::new();
    /// Format::OpenMetrics.encode_all(&[&merged, &own], Escaping::AllowUtf8, &mut out);
    /// assert_eq!(out, "# HELP vllm:waiting Waiting.\n\
    ///                  ## TYPE vllm:waiting gauge\n\
    ///                  vllm:waiting{\"model.name\"=\"m\"} 2.0\n\
    ///                  ## HELP \"caf\u{e9}\" Waiting.\n\
    ///                  ## TYPE \"caf\u{e9}\" gauge\n\
    ///                  {\"caf\u{e9}\",\"model.name\"=\"m\"} 2.0\n\
    ///                  ## EOF\n");
    ///
    /// let mut out = String::new();
    /// Format::Prometheus.encode_all(&[&merged, &own], Escaping::Underscores, &mut out);
    /// assert_eq!(out, "# HELP vllm:waiting Waiting.\n\
    ///                  ## TYPE vllm:waiting gauge\n\
    ///                  vllm:waiting{model_name=\"m\"} 2.0\n\
    ///                  ## HELP caf_ Waiting.\n\
    ///                  ## TYPE caf_ gauge\n\
    ///                  caf_{model_name=\"m\"} 2.0\n");
    /// ```
    pub fn encode_all<L: AsRef<[MergedFamily]>>(
        self,
        lists: &[L],
        escaping: Escaping,
        out: &mut String,
    ) {
        for families in lists {
            self.encode_families(families.as_ref(), escaping, out);
        }
        self.push_end(out);
    }

    /// Appends `families` without the end of the body.
    pub(crate) fn encode_families(
        self,
        families: &[MergedFamily],
        escaping: Escaping,
        out: &mut String,
    ) {
        match self {
            Format::Prometheus => {
                prometheus::encode_families(families, escaping, out, &mut Fresh);
            }
            Format::OpenMetrics => {
                openmetrics::encode_families(families, escaping, out, &mut Fresh);
            }
        }
    }

    /// Appends what ends a body in this format: `# EOF` for OpenMetrics,
    /// nothing for Prometheus.
    pub(crate) fn push_end(self, out: &mut String) {
        if self == Format::OpenMetrics {
            out.push_str(openmetrics::EOF);
        }
    }
}
