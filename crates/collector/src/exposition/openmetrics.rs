//! OpenMetrics 1.0.0, as `prometheus_client.openmetrics.exposition.generate_latest`.

use super::exemplar::push_exemplar;
use super::names::{push_escaped, push_labels_and_value, push_metric_name, push_om_sample_name};
use super::sample_lines::{Fresh, SampleLines};
use crate::family::MergedFamily;

/// Appends `families` in OpenMetrics 1.0.0, ending with `# EOF`.
///
/// Python's quirks are kept: HELP escapes `"` too, and sample names are
/// escaped with the label-name rules, so `:` becomes `_` in sample names only.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::{encode_openmetrics, FamilyType, MergedFamily, MergedSample};
/// let family = MergedFamily {
///     name: "requests".into(),
///     help: "Requests \"served\"".into(),
///     family_type: FamilyType::Counter,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: "requests_total".into(), labels: Arc::from([]), value: 3.0, exemplar: None }],
/// };
/// let mut out = String::new();
/// encode_openmetrics(&[family], &mut out);
/// assert_eq!(out, "# HELP requests Requests \\\"served\\\"\n\
///                  ## TYPE requests counter\n\
///                  requests_total 3.0\n\
///                  ## EOF\n");
/// ```
pub fn encode_openmetrics(families: &[MergedFamily], out: &mut String) {
    encode_openmetrics_with(families, SampleNames::LabelRules, out);
}

/// How OpenMetrics sample names are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SampleNames {
    /// With the label-name rules, so `:` becomes `_`: `prometheus_client`
    /// 0.23 and later.
    #[default]
    LabelRules,
    /// With the metric-name rules, so `:` stays (`vllm:requests_total`):
    /// what `prometheus_client` before 0.23 writes for the names it accepts
    /// (legacy names; others it writes as they are, which no parser reads,
    /// and here they get the metric-name rules' underscores).
    MetricRules,
}

/// [`encode_openmetrics`] with sample names written as `names` says.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::{encode_openmetrics_with, FamilyType, MergedFamily, MergedSample, SampleNames};
/// let family = MergedFamily {
///     name: "vllm:waiting".into(),
///     help: "Waiting.".into(),
///     family_type: FamilyType::Gauge,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: "vllm:waiting".into(), labels: Arc::from([]), value: 2.0, exemplar: None }],
/// };
/// let mut out = String::new();
/// encode_openmetrics_with(&[family], SampleNames::MetricRules, &mut out);
/// assert_eq!(out, "# HELP vllm:waiting Waiting.\n\
///                  ## TYPE vllm:waiting gauge\n\
///                  vllm:waiting 2.0\n\
///                  ## EOF\n");
/// ```
pub fn encode_openmetrics_with(families: &[MergedFamily], names: SampleNames, out: &mut String) {
    encode_families(families, names, out, &mut Fresh);
    out.push_str(EOF);
}

/// The line that ends an OpenMetrics body, once, after every family.
pub(crate) const EOF: &str = "# EOF\n";

/// [`encode_openmetrics`] without the `# EOF`, each sample line written
/// through `lines`.
pub(crate) fn encode_families(
    families: &[MergedFamily],
    names: SampleNames,
    out: &mut String,
    lines: &mut impl SampleLines,
) {
    for family in families {
        out.push_str("# HELP ");
        push_metric_name(out, &family.name);
        out.push(' ');
        push_escaped(out, &family.help, true);
        out.push_str("\n# TYPE ");
        push_metric_name(out, &family.name);
        out.push(' ');
        out.push_str(family.family_type.as_str());
        out.push('\n');
        for sample in &family.samples {
            lines.sample(out, sample, |out| {
                match names {
                    SampleNames::LabelRules => push_om_sample_name(out, &sample.name),
                    SampleNames::MetricRules => push_metric_name(out, &sample.name),
                }
                push_labels_and_value(out, &sample.labels, sample.value);
                if let Some(exemplar) = &sample.exemplar {
                    // Between the value and the line's end.
                    out.pop();
                    push_exemplar(out, exemplar);
                    out.push('\n');
                }
            });
        }
    }
}
