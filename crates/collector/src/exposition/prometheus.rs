//! Prometheus text format 0.0.4, as `prometheus_client.exposition.generate_latest`.

use super::names::{push_escaped, push_metric_name, push_name_and_labels, push_value, Escaping};
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
    encode_prometheus_with(families, Escaping::Underscores, out);
}

/// [`encode_prometheus`] with names escaped as `escaping` says, as
/// `prometheus_client`'s `generate_latest(registry, escaping)` writes them
/// (text format 1.0.0 when the scheme is not `underscores`).
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::{encode_prometheus_with, Escaping, FamilyType, MergedFamily, MergedSample};
/// let family = MergedFamily {
///     name: "caf\u{e9}".into(),
///     help: "Help.".into(),
///     family_type: FamilyType::Gauge,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: "caf\u{e9}".into(), labels: Arc::from([]), value: 1.0, exemplar: None }],
/// };
/// let mut out = String::new();
/// encode_prometheus_with(&[family], Escaping::AllowUtf8, &mut out);
/// assert_eq!(out, "# HELP \"caf\u{e9}\" Help.\n\
///                  ## TYPE \"caf\u{e9}\" gauge\n\
///                  {\"caf\u{e9}\"} 1.0\n");
/// ```
pub fn encode_prometheus_with(families: &[MergedFamily], escaping: Escaping, out: &mut String) {
    encode_families(families, escaping, out, &mut Fresh);
}

/// [`encode_prometheus_with`], each sample line written through `lines`.
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
