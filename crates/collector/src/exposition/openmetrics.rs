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
    encode_families(families, out, &mut Fresh);
    out.push_str(EOF);
}

/// The line that ends an OpenMetrics body, once, after every family.
pub(crate) const EOF: &str = "# EOF\n";

/// [`encode_openmetrics`] without the `# EOF`, each sample line written
/// through `lines`.
pub(crate) fn encode_families(
    families: &[MergedFamily],
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
                push_om_sample_name(out, &sample.name);
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
