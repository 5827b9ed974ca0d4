//! One merged family as `MetricFamily` messages that Prometheus reads back
//! as exactly the series the text format 0.0.4 serves for it.
//!
//! How Prometheus turns a message into series (`ProtobufParser`,
//! model/textparse/protobufparse.go, the same from 2.x to 3.x):
//! * COUNTER, GAUGE, UNTYPED: one series per metric, named `MetricFamily.name`
//!   as it is: nothing is appended, so a counter's family is named with its
//!   `_total` (client_golang registers counters under such names too);
//! * SUMMARY: `<name>_count`, `<name>_sum` and `<name>{quantile=...}`;
//! * HISTOGRAM (classic: no native-histogram field set): `<name>_count`,
//!   `<name>_sum`, `<name>_bucket{le=...}` per bucket and a `le="+Inf"`
//!   bucket of `sample_count` unless the last bucket's bound is `+Inf`;
//!   with native-histogram fields (a series with a merged native
//!   histogram, see `native`), one native histogram series `<name>`, and
//!   the classic series too where Prometheus is told to keep them.
//!
//! Samples that do not fit their family's message (say a `_created`, or a
//! histogram series without its `_count`) are served as families of their
//! own, so every sample stays a series of the same name, labels and value.

use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use multiprom_format::{Exemplar, NativeHistogram};

use super::native::set_native_fields;
use super::schema::{
    self, Bucket, Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType, Quantile, Summary,
    Untyped,
};
use super::timestamp::timestamp;
use crate::exposition::names::{push_protobuf_label_name, push_protobuf_metric_name, Escaping};
use crate::exposition::prometheus::OM_ONLY_SUFFIXES;
use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::native_histograms::NativeHistograms;
use crate::StartTimes;

/// The messages of `family`: its own (when it has a sample that fits it),
/// then one per name of the samples that do not fit, in order of appearance.
/// A histogram series with a native histogram in `natives` carries it.
pub(super) fn messages(
    family: &MergedFamily,
    natives: &NativeHistograms,
    start_times: Option<&StartTimes>,
    escaping: Escaping,
) -> Vec<MetricFamily> {
    let names = Names(escaping);
    let mut misfits = Misfits::default();
    let own = match family.family_type {
        FamilyType::Counter => {
            single_values(family, "_total", names, &mut misfits, |value, sample| {
                Metric {
                    counter: Some(Counter {
                        value: Some(value),
                        exemplar: sample.exemplar.as_deref().map(exemplar),
                        created_timestamp: created(start_times, family, sample),
                    }),
                    ..Metric::default()
                }
            })
        }
        FamilyType::Gauge => single_values(family, "", names, &mut misfits, |value, _| Metric {
            gauge: Some(Gauge { value: Some(value) }),
            ..Metric::default()
        }),
        FamilyType::Summary => grouped(
            family,
            MetricType::Summary,
            (natives, start_times),
            names,
            &mut misfits,
        ),
        FamilyType::Histogram => grouped(
            family,
            MetricType::Histogram,
            (natives, start_times),
            names,
            &mut misfits,
        ),
    };
    let mut messages = Vec::with_capacity(1 + misfits.names.len());
    if !own.metric.is_empty() {
        messages.push(own);
    }
    for (name, samples) in misfits.names {
        // The text encoder moves these to a gauge family of their own.
        let gauge = name
            .strip_prefix(&*family.name)
            .is_some_and(|rest| OM_ONLY_SUFFIXES.contains(&rest));
        let (metric_type, value): (MetricType, fn(f64) -> Metric) = if gauge {
            (MetricType::Gauge, |value| Metric {
                gauge: Some(Gauge { value: Some(value) }),
                ..Metric::default()
            })
        } else {
            (MetricType::Untyped, |value| Metric {
                untyped: Some(Untyped { value: Some(value) }),
                ..Metric::default()
            })
        };
        let mut message = names.header(&name, &family.help, metric_type);
        message.metric = samples
            .into_iter()
            .map(|sample| Metric {
                label: names.label_pairs(&sample.labels),
                ..value(sample.value)
            })
            .collect();
        messages.push(message);
    }
    messages
}

/// A counter or gauge family whose every sample fits its one message (no
/// `_created` or other misfit): its message without metrics, and each
/// sample's `Metric`, for an encoder that keeps each metric's bytes. `None`
/// for any other family: [`messages`] encodes it whole.
pub(super) struct SingleValues {
    pub(super) header: MetricFamily,
    family_type: FamilyType,
    names: Names,
}

impl SingleValues {
    pub(super) fn of(family: &MergedFamily, escaping: Escaping) -> Option<SingleValues> {
        let suffix = match family.family_type {
            FamilyType::Counter => "_total",
            FamilyType::Gauge => "",
            FamilyType::Summary | FamilyType::Histogram => return None,
        };
        // A merge hands a family's samples one shared name: compared once,
        // then known by its address (a family can have tens of thousands).
        let mut known: Option<*const u8> = None;
        let fits = |sample: &MergedSample| {
            if known == Some(sample.name.as_ptr()) {
                return true;
            }
            let fits = sample
                .name
                .strip_prefix(&*family.name)
                .is_some_and(|rest| rest == suffix);
            if fits {
                known = Some(sample.name.as_ptr());
            }
            fits
        };
        if family.samples.is_empty() || !family.samples.iter().all(fits) {
            return None;
        }
        let names = Names(escaping);
        let metric_type = if family.family_type == FamilyType::Counter {
            MetricType::Counter
        } else {
            MetricType::Gauge
        };
        Some(SingleValues {
            header: names.header(
                &format!("{}{suffix}", family.name),
                &family.help,
                metric_type,
            ),
            family_type: family.family_type,
            names,
        })
    }

    /// The metric of `sample` (of `family`), as [`messages`] makes it.
    pub(super) fn metric(
        &self,
        family: &MergedFamily,
        sample: &MergedSample,
        start_times: Option<&StartTimes>,
    ) -> Metric {
        let value = if self.family_type == FamilyType::Counter {
            Metric {
                counter: Some(Counter {
                    value: Some(sample.value),
                    exemplar: sample.exemplar.as_deref().map(exemplar),
                    created_timestamp: created(start_times, family, sample),
                }),
                ..Metric::default()
            }
        } else {
            Metric {
                gauge: Some(Gauge {
                    value: Some(sample.value),
                }),
                ..Metric::default()
            }
        };
        Metric {
            label: self.names.label_pairs(&sample.labels),
            ..value
        }
    }
}

/// When the series of `sample` started counting, as the
/// `created_timestamp` Prometheus 3 reads (for `rate()` and its zero
/// injection).
fn created(
    start_times: Option<&StartTimes>,
    family: &MergedFamily,
    sample: &MergedSample,
) -> Option<prost_types::Timestamp> {
    timestamp(StartTimes::seconds(start_times?.of(family, sample)))
}

/// Samples that do not fit their family's message, by name, names in order
/// of appearance.
#[derive(Default)]
struct Misfits<'a> {
    names: Vec<(Arc<str>, Vec<&'a MergedSample>)>,
}

impl<'a> Misfits<'a> {
    fn push(&mut self, sample: &'a MergedSample) {
        match self.names.iter_mut().find(|(name, _)| *name == sample.name) {
            Some((_, samples)) => samples.push(sample),
            None => self.names.push((Arc::clone(&sample.name), vec![sample])),
        }
    }
}

/// How the messages' metric and label names are escaped: as the scraper's
/// `escaping` parameter asks, as client_golang's protobuf encoder escapes
/// them (legacy names as they are, no name quoted: `allow-utf-8` leaves
/// every name as it is).
#[derive(Clone, Copy)]
struct Names(Escaping);

impl Names {
    /// A family message with no metrics yet.
    fn header(self, name: &str, help: &str, metric_type: MetricType) -> MetricFamily {
        MetricFamily {
            name: Some(self.metric_name(name)),
            help: Some(help.to_owned()),
            r#type: Some(metric_type as i32),
            metric: Vec::new(),
            unit: None,
        }
    }

    fn metric_name(self, name: &str) -> String {
        let mut escaped = String::with_capacity(name.len());
        push_protobuf_metric_name(&mut escaped, name, self.0);
        escaped
    }

    /// Label pairs, names escaped.
    fn label_pairs(self, labels: &[(Arc<str>, Arc<str>)]) -> Vec<LabelPair> {
        labels
            .iter()
            .map(|(name, value)| {
                let mut escaped = String::with_capacity(name.len());
                push_protobuf_label_name(&mut escaped, name, self.0);
                LabelPair {
                    name: Some(escaped),
                    value: Some(value.to_string()),
                }
            })
            .collect()
    }
}

/// A counter's or gauge's message: one metric per sample named the family's
/// name and `suffix`.
fn single_values<'a>(
    family: &'a MergedFamily,
    suffix: &str,
    names: Names,
    misfits: &mut Misfits<'a>,
    metric: impl Fn(f64, &MergedSample) -> Metric,
) -> MetricFamily {
    let name = format!("{}{suffix}", family.name);
    let metric_type = if family.family_type == FamilyType::Counter {
        MetricType::Counter
    } else {
        MetricType::Gauge
    };
    let mut message = names.header(&name, &family.help, metric_type);
    for sample in &family.samples {
        if *sample.name == *name {
            message.metric.push(Metric {
                label: names.label_pairs(&sample.labels),
                ..metric(sample.value, sample)
            });
        } else {
            misfits.push(sample);
        }
    }
    message
}

/// The labels of a summary's or histogram's metric: a sample's without
/// `quantile` or `le`.
type Labels = Vec<(Arc<str>, Arc<str>)>;

/// The samples of one label set of a summary or histogram.
#[derive(Default)]
struct Group<'a> {
    /// Every sample of the group, in order: served as misfits if the group
    /// does not make a whole message.
    samples: Vec<&'a MergedSample>,
    count: Option<f64>,
    sum: Option<f64>,
    /// A second `_count` or `_sum`: two series the message has one field for.
    repeated: bool,
    /// `(le, sample)` of a histogram, `(quantile, sample)` of a summary.
    bounded: Vec<(f64, &'a MergedSample)>,
}

impl Group<'_> {
    /// `_count` and `_sum`, when the group has one of each.
    fn count_and_sum(&self) -> Option<(f64, f64)> {
        (!self.repeated).then_some((self.count?, self.sum?))
    }
}

/// A summary's or histogram's message: one metric per label set (without
/// `quantile` or `le`), in order of first appearance.
fn grouped<'a>(
    family: &'a MergedFamily,
    metric_type: MetricType,
    (natives, start_times): (&NativeHistograms, Option<&StartTimes>),
    names: Names,
    misfits: &mut Misfits<'a>,
) -> MetricFamily {
    let (bounded_suffix, bound_label) = if metric_type == MetricType::Histogram {
        ("_bucket", "le")
    } else {
        ("", "quantile")
    };
    let mut groups: Vec<(Labels, Group<'a>)> = Vec::new();
    let mut index: HashMap<Labels, usize> = HashMap::new();
    for sample in &family.samples {
        let Some(suffix) = sample.name.strip_prefix(&*family.name) else {
            misfits.push(sample);
            continue;
        };
        let (key, bound) = if suffix == bounded_suffix {
            match bound_of(sample, bound_label) {
                Some((key, bound)) => (key, Some(bound)),
                None => {
                    misfits.push(sample);
                    continue;
                }
            }
        } else if suffix == "_count" || suffix == "_sum" {
            (sample.labels.to_vec(), None)
        } else {
            misfits.push(sample);
            continue;
        };
        let at = *index.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Group::default()));
            groups.len() - 1
        });
        let group = &mut groups[at].1;
        group.samples.push(sample);
        match (bound, suffix) {
            (Some(bound), _) => group.bounded.push((bound, sample)),
            (None, "_count") => group.repeated |= group.count.replace(sample.value).is_some(),
            (None, _) => group.repeated |= group.sum.replace(sample.value).is_some(),
        }
    }
    let mut message = names.header(&family.name, &family.help, metric_type);
    for (labels, group) in groups {
        let mut made = if metric_type == MetricType::Histogram {
            histogram(&group, natives.get(&family.name, &labels))
        } else {
            summary(&group)
        };
        // The series' start, by its `_count` (a histogram's buckets share it).
        let counting = group.samples.iter().find(|s| s.name.ends_with("_count"));
        let started = counting.and_then(|sample| created(start_times, family, sample));
        if let Some(metric) = &mut made {
            if let Some(histogram) = &mut metric.histogram {
                histogram.created_timestamp = started;
            } else if let Some(summary) = &mut metric.summary {
                summary.created_timestamp = started;
            }
        }
        match made {
            Some(metric) => message.metric.push(Metric {
                label: names.label_pairs(&labels),
                ..metric
            }),
            None => group.samples.iter().for_each(|sample| misfits.push(sample)),
        }
    }
    message
}

/// A sample's labels without `bound_label`, and that label's value as a
/// number (`None` without one, or with one that is no number).
fn bound_of(sample: &MergedSample, bound_label: &str) -> Option<(Labels, f64)> {
    let mut bound = None;
    let mut rest = Vec::with_capacity(sample.labels.len());
    for (name, value) in sample.labels.iter() {
        if **name == *bound_label {
            // Python writes bounds as floatToGoString: `0.5`, `1e+06`, `+Inf`.
            bound = Some(value.parse::<f64>().ok()?);
        } else {
            rest.push((Arc::clone(name), Arc::clone(value)));
        }
    }
    Some((rest, bound?))
}

/// A histogram's metric, when the group is one as Prometheus would read it
/// back: `_count`, `_sum`, buckets in increasing order, the last `+Inf` and
/// equal to `_count` (which is what Prometheus serves as its `+Inf`
/// bucket). With the series' `native` histogram, the native fields too
/// (see `native`), and the buckets' exemplars in the native exemplars.
fn histogram(group: &Group<'_>, native: Option<&NativeHistogram>) -> Option<Metric> {
    let (count, sum) = group.count_and_sum()?;
    let (&(last_bound, last), _) = group.bounded.split_last()?;
    let increasing = group.bounded.windows(2).all(|w| w[0].0 < w[1].0);
    if !increasing || last_bound != f64::INFINITY || last.value.to_bits() != count.to_bits() {
        return None;
    }
    let (sample_count, sample_count_float) = whole_count(count);
    let mut buckets: Vec<Bucket> = group
        .bounded
        .iter()
        .map(|&(bound, sample)| {
            let (cumulative_count, cumulative_count_float) = whole_count(sample.value);
            Bucket {
                cumulative_count: Some(cumulative_count),
                cumulative_count_float,
                upper_bound: Some(bound),
                exemplar: sample.exemplar.as_deref().map(exemplar),
            }
        })
        .collect();
    let mut message = schema::Histogram {
        sample_count: Some(sample_count),
        sample_count_float,
        sample_sum: Some(sum),
        ..schema::Histogram::default()
    };
    // Prometheus makes the `+Inf` bucket from `sample_count` when it is
    // left out: the native count, with a native histogram, which can
    // differ from the classic one (a process that records only the classic
    // part of the same series).
    let mut inf_from_count = true;
    if let Some(native) = native {
        // Native exemplars must have a timestamp.
        message.exemplars = buckets
            .iter()
            .filter_map(|bucket| bucket.exemplar.clone())
            .filter(|exemplar| exemplar.timestamp.is_some())
            .collect();
        set_native_fields(&mut message, native);
        inf_from_count = (sample_count, sample_count_float) == (native.count(), None);
        if inf_from_count {
            // Every observation counted both ways: the classic sum is the
            // sum of the same observations, added in Python's order, so the
            // same from one scrape to the next and equal to the text
            // `_sum`. The native merge adds its sums in an order that
            // varies with how its files were read (settled ones first,
            // others per thread), and a sum one bit lower than the last
            // scrape's reads as a counter reset of `_sum`.
            message.sample_sum = Some(sum);
        }
        if group.bounded.len() == 1 {
            // A classic part of `+Inf` alone is a native-only histogram's
            // (prometheus_client's own have at least two buckets).
            buckets.clear();
        }
    }
    // As client_golang: the `+Inf` bucket only to carry an exemplar;
    // Prometheus makes it from `sample_count` otherwise.
    if inf_from_count && buckets.last().is_some_and(|b| b.exemplar.is_none()) {
        buckets.pop();
    }
    message.bucket = buckets;
    Some(Metric {
        histogram: Some(message),
        ..Metric::default()
    })
}

/// A summary's metric, when the group has `_count` and `_sum` (and any
/// quantiles).
fn summary(group: &Group<'_>) -> Option<Metric> {
    let (count, sum) = group.count_and_sum()?;
    let (sample_count, sample_count_float) = whole_count(count);
    if sample_count_float.is_some() {
        // A summary's count has no float field: Prometheus would read a
        // different number back.
        return None;
    }
    Some(Metric {
        summary: Some(Summary {
            sample_count: Some(sample_count),
            sample_sum: Some(sum),
            quantile: group
                .bounded
                .iter()
                .map(|&(quantile, sample)| Quantile {
                    quantile: Some(quantile),
                    value: Some(sample.value),
                })
                .collect(),
            created_timestamp: None,
        }),
        ..Metric::default()
    })
}

/// A count for the integer field, and the value again for the float field
/// when it is not a whole number the integer holds (Prometheus 2.x reads
/// only the integer; later versions take the float when it is above 0).
/// Counts `prometheus_client` writes are whole numbers.
fn whole_count(value: f64) -> (u64, Option<f64>) {
    // 2^64: the first whole number a u64 does not hold.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // saturating
    let whole = value as u64;
    let exact = (0.0..LIMIT).contains(&value) && value.fract() == 0.0;
    (whole, (!exact).then_some(value))
}

/// An exemplar message: labels sorted by name, as OpenMetrics prints them.
fn exemplar(exemplar: &Exemplar) -> schema::Exemplar {
    let mut labels: Vec<&(String, String)> = exemplar.labels.iter().collect();
    labels.sort();
    schema::Exemplar {
        label: labels
            .into_iter()
            .map(|(name, value)| LabelPair {
                name: Some(name.clone()),
                value: Some(value.clone()),
            })
            .collect(),
        value: Some(exemplar.value),
        timestamp: timestamp(exemplar.timestamp),
    }
}
