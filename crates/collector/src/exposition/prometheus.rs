//! Prometheus text format 0.0.4, as `prometheus_client.exposition.generate_latest`.

use super::names::{push_escaped, push_metric_name, push_name_and_labels, push_value, Escaping};
use super::sample_lines::SampleLines;
use crate::family::{FamilyType, MergedFamily, MergedSample};

/// Suffixes Python moves out of a family into a trailing gauge family.
pub(super) const OM_ONLY_SUFFIXES: [&str; 3] = ["_created", "_gcount", "_gsum"];

/// Appends `families` in Prometheus text format 0.0.4, names escaped as
/// `escaping` says (text format 1.0.0 when the scheme is not
/// `underscores`), each sample line written through `lines`.
pub(crate) fn encode_families(
    families: &[MergedFamily],
    escaping: Escaping,
    out: &mut String,
    lines: &mut impl SampleLines,
) {
    for family in families {
        let mut header_name = String::with_capacity(family.name.len() + 6);
        header_name.push_str(&family.name);
        if family.family_type == FamilyType::Counter {
            header_name.push_str("_total");
        }
        push_header(
            out,
            &header_name,
            &family.help,
            family.family_type.as_str(),
            escaping,
        );
        let mut split_out: [Vec<&MergedSample>; 3] = Default::default();
        for sample in &family.samples {
            let suffix = sample
                .name
                .strip_prefix(&*family.name)
                .and_then(|rest| OM_ONLY_SUFFIXES.iter().position(|s| *s == rest));
            match suffix {
                Some(i) => split_out[i].push(sample),
                None => push_sample(out, sample, escaping, lines),
            }
        }
        for (suffix, samples) in OM_ONLY_SUFFIXES.iter().zip(&split_out) {
            if samples.is_empty() {
                continue;
            }
            push_header(
                out,
                &format!("{}{suffix}", family.name),
                &family.help,
                "gauge",
                escaping,
            );
            for sample in samples {
                push_sample(out, sample, escaping, lines);
            }
        }
    }
}

fn push_header(out: &mut String, name: &str, help: &str, type_name: &str, escaping: Escaping) {
    out.push_str("# HELP ");
    push_metric_name(out, name, escaping);
    out.push(' ');
    push_escaped(out, help, false);
    out.push_str("\n# TYPE ");
    push_metric_name(out, name, escaping);
    out.push(' ');
    out.push_str(type_name);
    out.push('\n');
}

fn push_sample(
    out: &mut String,
    sample: &MergedSample,
    escaping: Escaping,
    lines: &mut impl SampleLines,
) {
    lines.sample(out, sample, |out| {
        push_name_and_labels(
            out,
            &sample.name,
            &sample.labels,
            escaping,
            push_metric_name,
        );
        push_value(out, sample.value);
    });
}
