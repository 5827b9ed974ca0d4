//! [`RegistryCollector`]: a multiprocess directory as a
//! `prometheus_client` (Rust crate, 0.23) [`Collector`], so a Rust host can
//! register its Python workers' metrics in its own `Registry`, next to its own.
//!
//! That crate's encoder cannot express everything Python's output can. What
//! it cannot say, and what this adapter does about it:
//!
//! * **OpenMetrics only**, and its own number formatting: values are printed
//!   by `dtoa` (`1000000.0`, `1e16`, infinities as `inf`/`-inf`), not with
//!   Python's `floatToGoString` (`1e+06`, `+Inf`). The numbers are the same;
//!   the text is not byte-identical to Python's. Use [`crate::DirCollector`]
//!   and [`crate::Format`] when bytes must match.
//! * **No summary type.** A multiprocess summary has only `_count` and `_sum`
//!   (no quantiles), so each becomes its own `unknown` family, `<name>_count`
//!   and `<name>_sum`: the sample lines keep Python's names and labels.
//! * **Histogram bucket counts are `u64`.** Bucket values from the files are
//!   floats; a label set whose buckets are not all whole numbers in
//!   `0..=2^53` (only possible with hand-made files) is left out and logged.
//!   The `+Inf` bucket is passed as `f64::MAX`, which the encoder prints as
//!   `+Inf`. `le` is printed before the other labels, and `_count` right after
//!   `_sum`, as that encoder does.
//! * **No escaping.** It writes names, help and label values verbatim, so
//!   this adapter escapes them first as Python's OpenMetrics encoder does:
//!   names with its `underscores` rule, help and label values with `\\`,
//!   `\n` and `\"`. One exception: the crate derives sample names from the
//!   family name, so a `:` stays in sample names (`ns:x_total`), where Python
//!   turns it into `_` in sample lines only. An empty label set prints no
//!   braces.
//! * Samples whose name does not fit their family's type (for example a
//!   counter entry not named `<family>_total`, only possible with hand-made
//!   files) cannot be encoded and are left out and logged.
//! * **No exemplars, no native histograms.** That crate's `Exemplar` can only
//!   be made by its own metric types (its fields are private to it, and it
//!   has no constructor), and its encoder has no native histograms; so the
//!   workers' exemplars and native histograms are not passed on. The
//!   endpoint (`multiprom-http`), or [`crate::DirCollector`] with
//!   [`crate::Format::OpenMetrics`] or
//!   [`crate::exposition::encode_protobuf`], serves them.
//!
//! Bad files and conflicts are logged with `tracing` (once per file state,
//! as [`crate::Scrape::warnings`] reports them); a directory that cannot be
//! listed logs a warning and contributes nothing, so the host's own metrics
//! are still served.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, LabelSetEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;

use crate::collector::{CollectOptions, DirCollector};
use crate::exposition::names::{push_escaped, push_label_name, push_metric_name, Escaping};
use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::parse::parse_python_float;

/// Largest integer up to which every `f64` integer is exact.
const MAX_EXACT_COUNT: f64 = 9_007_199_254_740_992.0;

/// A multiprocess directory as a `prometheus_client` [`Collector`].
///
/// ```
/// use multiprom_collector::RegistryCollector;
/// use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};
/// use prometheus_client::{encoding::text::encode, metrics::counter::Counter, registry::Registry};
///
/// let dir = tempfile::tempdir()?;
/// let name = FileName::new(MetricKind::Gauge(GaugeMode::LiveSum), "7")?;
/// let mut file = FileWriter::open(dir.path(), &name)?;
/// file.slot(&encode_key("busy", "busy", [("model", "a\"b")], "Busy workers."))?.set(3.0);
///
/// let mut registry = Registry::default();
/// let host: Counter = Counter::default();
/// registry.register("host_requests", "Requests", host.clone());
/// host.inc();
/// registry.register_collector(Box::new(RegistryCollector::new(dir.path())));
///
/// let mut text = String::new();
/// encode(&mut text, &registry)?;
/// assert_eq!(text, "\
/// ## HELP host_requests Requests.
/// ## TYPE host_requests counter
/// host_requests_total 1
/// ## HELP busy Busy workers.
/// ## TYPE busy gauge
/// busy{model=\"a\\\"b\"} 3.0
/// ## EOF
/// ");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RegistryCollector {
    collector: DirCollector,
    /// What was already logged as inexpressible, so it is logged once.
    logged: Mutex<HashSet<String>>,
}

impl RegistryCollector {
    /// A collector for the directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        // Raw buckets: the encoder wants per-bucket counts and accumulates
        // them itself.
        RegistryCollector {
            collector: DirCollector::with_options(dir, CollectOptions::default().accumulate(false)),
            logged: Mutex::new(HashSet::new()),
        }
    }

    fn log_once(&self, message: String) {
        let mut logged = self
            .logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if logged.len() > 10_000 {
            logged.clear();
        }
        if logged.insert(message.clone()) {
            tracing::warn!("{message}");
        }
    }
}

impl Collector for RegistryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let scrape = match self.collector.collect() {
            Ok(scrape) => scrape,
            Err(err) => {
                self.log_once(err.to_string());
                return Ok(());
            }
        };
        for warning in &scrape.warnings {
            tracing::warn!("{warning}");
        }
        let mut skipped = Vec::new();
        for family in &scrape.families {
            encode_family(&mut encoder, family, &mut skipped)?;
        }
        for message in skipped {
            self.log_once(message);
        }
        Ok(())
    }
}

/// Label pairs written the way Python's OpenMetrics encoder escapes them.
struct EscapedLabels<'a>(&'a [(Arc<str>, Arc<str>)]);

impl EncodeLabelSet for EscapedLabels<'_> {
    fn encode(&self, mut encoder: LabelSetEncoder<'_>) -> Result<(), fmt::Error> {
        let mut buf = String::new();
        for (name, value) in self.0 {
            let mut label = encoder.encode_label();
            let mut key = label.encode_label_key()?;
            buf.clear();
            push_label_name(&mut buf, name, Escaping::Underscores);
            key.write_str(&buf)?;
            let mut value_encoder = key.encode_label_value()?;
            buf.clear();
            push_escaped(&mut buf, value, true);
            value_encoder.write_str(&buf)?;
            value_encoder.finish()?;
        }
        Ok(())
    }
}

fn escaped_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    push_metric_name(&mut out, name, Escaping::Underscores);
    out
}

fn escaped_help(help: &str) -> String {
    let mut out = String::with_capacity(help.len());
    push_escaped(&mut out, help, true);
    out
}

/// Calls `f` with an encoder for `labels`: the family's own encoder when
/// there are none (the crate would print `{}` for an empty set).
fn with_labels(
    metric: &mut MetricEncoder<'_>,
    labels: &[(Arc<str>, Arc<str>)],
    f: impl FnOnce(&mut MetricEncoder<'_>) -> Result<(), fmt::Error>,
) -> Result<(), fmt::Error> {
    if labels.is_empty() {
        f(metric)
    } else {
        let set = EscapedLabels(labels);
        f(&mut metric.encode_family(&set)?)
    }
}

fn encode_family(
    encoder: &mut DescriptorEncoder<'_>,
    family: &MergedFamily,
    skipped: &mut Vec<String>,
) -> Result<(), fmt::Error> {
    let help = escaped_help(&family.help);
    let name = escaped_name(&family.name);
    let mut skip = |sample: &MergedSample, why: &str| {
        skipped.push(format!(
            "prometheus-client adapter: left out sample {:?} of {} {:?}: {why}",
            sample.name, family.family_type, family.name
        ));
    };
    match family.family_type {
        FamilyType::Counter => {
            let total = format!("{}_total", family.name);
            let mut metric = encoder.encode_descriptor(&name, &help, None, MetricType::Counter)?;
            for sample in &family.samples {
                if *sample.name != *total {
                    skip(sample, "a counter sample must be named <family>_total");
                    continue;
                }
                with_labels(&mut metric, &sample.labels, |m| {
                    m.encode_counter::<NoLabelSet, f64, f64>(
                        &sample.value,
                        None::<&Exemplar<NoLabelSet, f64>>,
                    )
                })?;
            }
        }
        FamilyType::Gauge => {
            let mut metric = encoder.encode_descriptor(&name, &help, None, MetricType::Gauge)?;
            for sample in &family.samples {
                if sample.name != family.name {
                    skip(sample, "a gauge sample must be named like its family");
                    continue;
                }
                with_labels(&mut metric, &sample.labels, |m| {
                    m.encode_gauge(&sample.value)
                })?;
            }
        }
        FamilyType::Summary => {
            // No summary type: `_count` and `_sum` as two `unknown` families.
            for suffix in ["_count", "_sum"] {
                let sample_name = format!("{}{suffix}", family.name);
                let escaped = escaped_name(&sample_name);
                let mut metric =
                    encoder.encode_descriptor(&escaped, &help, None, MetricType::Unknown)?;
                for sample in family.samples.iter().filter(|s| *s.name == *sample_name) {
                    with_labels(&mut metric, &sample.labels, |m| {
                        m.encode_gauge(&sample.value)
                    })?;
                }
            }
            for sample in &family.samples {
                let rest = sample.name.strip_prefix(&*family.name);
                if !matches!(rest, Some("_count" | "_sum")) {
                    skip(
                        sample,
                        "a summary sample must be named <family>_count or _sum",
                    );
                }
            }
        }
        FamilyType::Histogram => {
            let groups = histogram_groups(family, &mut skip);
            let mut metric =
                encoder.encode_descriptor(&name, &help, None, MetricType::Histogram)?;
            for group in groups {
                with_labels(&mut metric, &group.labels, |m| {
                    m.encode_histogram::<NoLabelSet>(group.sum, group.count, &group.buckets, None)
                })?;
            }
        }
    }
    Ok(())
}

/// Label pairs, owned.
type Labels = Vec<(Arc<str>, Arc<str>)>;

/// One histogram label set in the shape the encoder takes.
struct HistogramGroup {
    labels: Labels,
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

/// Groups raw (`accumulate=False`) histogram samples by label set, keeping
/// only label sets the encoder can express exactly.
fn histogram_groups(
    family: &MergedFamily,
    skip: &mut impl FnMut(&MergedSample, &str),
) -> Vec<HistogramGroup> {
    struct Acc<'a> {
        labels: Labels,
        sum: Option<f64>,
        buckets: Vec<(f64, u64)>,
        broken: Option<(&'a MergedSample, &'static str)>,
    }
    let sum_name = format!("{}_sum", family.name);
    let bucket_name = format!("{}_bucket", family.name);
    let mut groups: Vec<Acc<'_>> = Vec::new();
    let mut index: HashMap<Labels, usize> = HashMap::new();
    for sample in &family.samples {
        let le = sample
            .labels
            .iter()
            .find(|(k, _)| &**k == "le")
            .map(|(_, v)| v);
        let labels: Labels = sample
            .labels
            .iter()
            .filter(|(k, _)| &**k != "le")
            .cloned()
            .collect();
        let i = *index.entry(labels.clone()).or_insert_with(|| {
            groups.push(Acc {
                labels,
                sum: None,
                buckets: Vec::new(),
                broken: None,
            });
            groups.len() - 1
        });
        let group = &mut groups[i];
        match le {
            Some(le) if *sample.name == *bucket_name => {
                let count = sample.value;
                match parse_python_float(le) {
                    Some(bound)
                        if (0.0..=MAX_EXACT_COUNT).contains(&count) && count.fract() == 0.0 =>
                    {
                        let bound = if bound == f64::INFINITY {
                            f64::MAX
                        } else {
                            bound
                        };
                        group.buckets.push((bound, count as u64));
                    }
                    _ => {
                        group.broken.get_or_insert((
                            sample,
                            "bucket counts must be whole numbers in 0..=2^53",
                        ));
                    }
                }
            }
            None if *sample.name == *sum_name && group.sum.is_none() => {
                group.sum = Some(sample.value);
            }
            _ => skip(sample, "not a histogram _sum or _bucket sample"),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        if let Some((sample, why)) = group.broken {
            skip(sample, why);
            continue;
        }
        let count = group
            .buckets
            .iter()
            .try_fold(0u64, |acc, (_, c)| acc.checked_add(*c));
        match (group.sum, count) {
            (Some(sum), Some(count)) => out.push(HistogramGroup {
                labels: group.labels,
                sum,
                count,
                buckets: group.buckets,
            }),
            _ => {
                if let Some(sample) = family.samples.first() {
                    skip(
                        sample,
                        "label set without a _sum, or with a bucket total past u64",
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::RegistryCollector;

    fn encoded(dir: &std::path::Path) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(RegistryCollector::new(dir)));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn escapes_names_help_and_labels_and_leaves_out_what_it_cannot_say() {
        let dir = tempfile::tempdir().unwrap();
        let mut counter = FileWriter::open(
            dir.path(),
            &FileName::new(MetricKind::Counter, "1").unwrap(),
        )
        .unwrap();
        let help = "Line one\nline \"two\" \\";
        counter
            .slot(&encode_key(
                "ns:x",
                "ns:x_total",
                [("a-b", "v\n\"\\")],
                help,
            ))
            .unwrap()
            .add(2.0);
        // Not expressible by the crate: a counter sample not named _total.
        counter
            .slot(&encode_key("ns:x", "ns:x_created", [], help))
            .unwrap()
            .set(1.0);
        let mut histogram = FileWriter::open(
            dir.path(),
            &FileName::new(MetricKind::Histogram, "1").unwrap(),
        )
        .unwrap();
        for (labels, le, count) in [
            ("ok", "1.0", 2.0),
            ("ok", "+Inf", 1.0),
            ("half", "1.0", 0.5),
        ] {
            let key = |sample: &str, le: Option<&str>| {
                let mut pairs = vec![("set", labels)];
                pairs.extend(le.map(|le| ("le", le)));
                encode_key("h", sample, pairs, "H.")
            };
            histogram.slot(&key("h_sum", None)).unwrap().set(1.5);
            histogram
                .slot(&key("h_bucket", Some(le)))
                .unwrap()
                .set(count);
        }
        assert_eq!(
            encoded(dir.path()),
            "# HELP ns:x Line one\\nline \\\"two\\\" \\\\\n\
             # TYPE ns:x counter\n\
             ns:x_total{a_b=\"v\\n\\\"\\\\\"} 2.0\n\
             # HELP h H.\n\
             # TYPE h histogram\n\
             h_sum{set=\"ok\"} 1.5\n\
             h_count{set=\"ok\"} 3\n\
             h_bucket{le=\"1.0\",set=\"ok\"} 2\n\
             h_bucket{le=\"+Inf\",set=\"ok\"} 3\n\
             # EOF\n"
        );
    }
}
