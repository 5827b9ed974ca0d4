//! Prometheus text format 0.0.4, as `prometheus_client.exposition.generate_latest`.

use super::names::{push_escaped, push_labels_and_value, push_metric_name};
use super::sample_lines::{Fresh, SampleLines};
use crate::family::{FamilyType, MergedFamily, MergedSample};

/// Suffixes Python moves out of a family into a trailing gauge family.
pub(super) const OM_ONLY_SUFFIXES: [&str; 3] = ["_created", "_gcount", "_gsum"];

/// Appends `families` in Prometheus text format 0.0.4.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::{encode_prometheus, FamilyType, MergedFamily, MergedSample};
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
/// encode_prometheus(&[family], &mut out);
/// assert_eq!(out, "# HELP requests_total Requests \\\\ served\\nby \"us\"\n\
///                  ## TYPE requests_total counter\n\
///                  requests_total{code=\"2\\\"00\"} 1.234567e+06\n");
/// ```
pub fn encode_prometheus(families: &[MergedFamily], out: &mut String) {
    encode_families(families, out, &mut Fresh);
}

/// [`encode_prometheus`], each sample line written through `lines`.
pub(crate) fn encode_families(
    families: &[MergedFamily],
    out: &mut String,
    lines: &mut impl SampleLines,
) {
    for family in families {
        let mut header_name = String::with_capacity(family.name.len() + 6);
        header_name.push_str(&family.name);
        if family.family_type == FamilyType::Counter {
            header_name.push_str("_total");
        }
        push_header(out, &header_name, &family.help, family.family_type.as_str());
        let mut split_out: [Vec<&MergedSample>; 3] = Default::default();
        for sample in &family.samples {
            let suffix = sample
                .name
                .strip_prefix(&*family.name)
                .and_then(|rest| OM_ONLY_SUFFIXES.iter().position(|s| *s == rest));
            match suffix {
                Some(i) => split_out[i].push(sample),
                None => push_sample(out, sample, lines),
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
            );
            for sample in samples {
                push_sample(out, sample, lines);
            }
        }
    }
}

fn push_header(out: &mut String, name: &str, help: &str, type_name: &str) {
    out.push_str("# HELP ");
    push_metric_name(out, name);
    out.push(' ');
    push_escaped(out, help, false);
    out.push_str("\n# TYPE ");
    push_metric_name(out, name);
    out.push(' ');
    out.push_str(type_name);
    out.push('\n');
}

fn push_sample(out: &mut String, sample: &MergedSample, lines: &mut impl SampleLines) {
    lines.sample(out, sample, |out| {
        push_metric_name(out, &sample.name);
        push_labels_and_value(out, &sample.labels, sample.value);
    });
}
