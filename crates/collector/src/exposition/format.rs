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

    /// Appends `families` in this format to `out`, names escaped with
    /// `underscores`. OpenMetrics output ends with `# EOF`.
    pub fn encode(self, families: &[MergedFamily], out: &mut String) {
        self.encode_all(&[families], Escaping::Underscores, out);
    }

    /// Appends the families of every list of `lists`, one list after the
    /// other, in this format to `out` as one body, names escaped as
    /// `escaping` says: OpenMetrics output ends with one `# EOF`, after the
    /// last list. See [`super::Body`] for a body whose lists come one at a
    /// time.
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
