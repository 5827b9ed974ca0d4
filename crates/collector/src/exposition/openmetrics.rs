//! OpenMetrics 1.0.0, as `prometheus_client.openmetrics.exposition.generate_latest`.

use super::exemplar::push_exemplar;
use super::names::{
    push_escaped, push_metric_name, push_name_and_labels, push_om_sample_name, push_value, Escaping,
};
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
    encode_openmetrics_with(families, Escaping::Underscores, out);
}

/// [`encode_openmetrics`] with names escaped as `escaping` says, as
/// `prometheus_client`'s `generate_latest(registry, escaping)` writes them.
/// `allow-utf-8` keeps a `:` in sample names (as releases before 0.23 write
/// every name they accept) and quotes a name that is not a legacy name:
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::{encode_openmetrics_with, Escaping, FamilyType, MergedFamily, MergedSample};
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
/// let mut out = String::new();
/// encode_openmetrics_with(&[gauge("vllm:waiting"), gauge("caf\u{e9}")], Escaping::AllowUtf8, &mut out);
/// assert_eq!(out, "# HELP vllm:waiting Waiting.\n\
///                  ## TYPE vllm:waiting gauge\n\
///                  vllm:waiting{\"model.name\"=\"m\"} 2.0\n\
///                  ## HELP \"caf\u{e9}\" Waiting.\n\
///                  ## TYPE \"caf\u{e9}\" gauge\n\
///                  {\"caf\u{e9}\",\"model.name\"=\"m\"} 2.0\n\
///                  ## EOF\n");
/// ```
pub fn encode_openmetrics_with(families: &[MergedFamily], escaping: Escaping, out: &mut String) {
    encode_families(families, escaping, out, &mut Fresh);
    out.push_str(EOF);
}

/// The line that ends an OpenMetrics body, once, after every family.
pub(crate) const EOF: &str = "# EOF\n";

/// [`encode_openmetrics`] without the `# EOF`, each sample line written
/// through `lines`.
pub(crate) fn encode_families(
    families: &[MergedFamily],
    escaping: Escaping,
    out: &mut String,
    lines: &mut impl SampleLines,
) {
    for family in families {
        out.push_str("# HELP ");
        push_metric_name(out, &family.name, escaping);
        out.push(' ');
        push_escaped(out, &family.help, true);
        out.push_str("\n# TYPE ");
        push_metric_name(out, &family.name, escaping);
        out.push(' ');
        out.push_str(family.family_type.as_str());
        out.push('\n');
        for sample in &family.samples {
            lines.sample(out, sample, |out| {
                push_name_and_labels(
                    out,
                    &sample.name,
                    &sample.labels,
                    escaping,
                    push_om_sample_name,
                );
                push_value(out, sample.value);
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
