//! OpenMetrics 1.0.0, as `prometheus_client.openmetrics.exposition.generate_latest`.

use super::exemplar::push_exemplar;
use super::names::{
    push_escaped, push_metric_name, push_name_and_labels, push_om_sample_name, push_value, Escaping,
};
use super::sample_lines::SampleLines;
use crate::family::MergedFamily;

/// The line that ends an OpenMetrics body, once, after every family.
pub(crate) const EOF: &str = "# EOF\n";

/// Appends `families` in OpenMetrics 1.0.0 without the `# EOF`, names
/// escaped as `escaping` says, each sample line written through `lines`.
///
/// Python's quirks are kept: HELP escapes `"` too, and sample names are
/// escaped with the label-name rules, so `:` becomes `_` in sample names
/// only (`allow-utf-8` keeps it, as releases before 0.23 write every name
/// they accept).
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
