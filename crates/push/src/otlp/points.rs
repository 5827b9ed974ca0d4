//! A merged family as the cumulative points of its series, before they
//! become OTLP messages (the delta encoder works on these).

use std::sync::Arc;
use std::time::SystemTime;

use multiprom_collector::{FamilyType, MergedFamily, MergedSample, Served};
use multiprom_format::NativeHistogram;

use super::exemplar::exemplar;
use super::proto::common::v1::{any_value, AnyValue, KeyValue};
use super::proto::metrics::v1::Exemplar;

/// The OTLP data type a family's series are sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    /// A counter.
    Sum,
    /// A gauge.
    Gauge,
    /// A classic histogram.
    Histogram,
    /// A native histogram.
    Exponential,
    /// A summary.
    Summary,
}

/// One series' cumulative value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    /// A counter's or a gauge's value.
    Number(f64),
    /// A classic histogram: the finite bounds, each bucket's own count
    /// (one more than the bounds: the last is `+Inf`'s), count and sum.
    Histogram {
        bounds: Vec<f64>,
        counts: Vec<u64>,
        count: u64,
        sum: Option<f64>,
    },
    /// A native histogram.
    Exponential(NativeHistogram),
    /// A summary: count, sum, and (quantile, value) pairs.
    Summary {
        count: u64,
        sum: f64,
        quantiles: Vec<(f64, f64)>,
    },
}

/// One series of a family.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Series {
    /// Its labels (a histogram's without `le`, a summary's without
    /// `quantile`), sorted by name.
    pub(super) labels: Vec<(Arc<str>, Arc<str>)>,
    /// When it started counting.
    pub(super) start: SystemTime,
    /// Its cumulative value.
    pub(super) value: Value,
    /// Its exemplars, converted.
    pub(super) exemplars: Vec<Exemplar>,
}

/// `family`'s series, by the OTLP type each is sent as (in the order the
/// family serves them; a histogram family may have both kinds).
pub(super) fn family_series(family: &MergedFamily, served: &Served) -> Vec<(Kind, Vec<Series>)> {
    match family.family_type {
        FamilyType::Counter => vec![(Kind::Sum, numbers(family, served))],
        FamilyType::Gauge => vec![(Kind::Gauge, numbers(family, served))],
        FamilyType::Summary => vec![(Kind::Summary, summary(family, served))],
        FamilyType::Histogram => histogram(family, served),
    }
}

/// The samples of a counter or gauge family that are its values: all of a
/// gauge's, a counter's `_total` ones (its other samples, `_created`, which
/// multiprocess files do not have, are not values).
pub(super) fn number_samples(family: &MergedFamily) -> impl Iterator<Item = &MergedSample> {
    let counter = family.family_type == FamilyType::Counter;
    family
        .samples
        .iter()
        .filter(move |sample| !counter || suffix(family, sample) == Some("_total"))
}

/// A counter's or a gauge's series (only a counter's samples carry
/// exemplars).
fn numbers(family: &MergedFamily, served: &Served) -> Vec<Series> {
    number_samples(family)
        .map(|sample| Series {
            labels: sample.labels.to_vec(),
            start: served.start_times.of(family, sample),
            value: Value::Number(sample.value),
            exemplars: sample.exemplar.iter().map(|e| exemplar(e)).collect(),
        })
        .collect()
}

/// A series' labels.
type Labels = Vec<(Arc<str>, Arc<str>)>;

/// The samples of one histogram or summary series, gathered.
#[derive(Debug)]
struct Gathered<'a> {
    labels: Vec<(Arc<str>, Arc<str>)>,
    first: &'a MergedSample,
    /// (`le` or `quantile`, value, sample).
    parts: Vec<(f64, &'a MergedSample)>,
    count: Option<f64>,
    sum: Option<f64>,
}

/// `family`'s samples gathered by series: labels without `split` (`le`,
/// `quantile`), in the order the series first appear. `part` names the
/// samples that carry `split` (`_bucket`, or the bare name).
fn gather<'a>(family: &'a MergedFamily, part: &str, split: &str) -> Vec<Gathered<'a>> {
    let mut series: Vec<Gathered<'a>> = Vec::new();
    // Each series' place, by its labels (a family may have thousands).
    let mut places: foldhash::HashMap<Labels, usize> = foldhash::HashMap::default();
    for sample in &family.samples {
        let Some(suffix) = suffix(family, sample) else {
            continue;
        };
        let mut at = None;
        let labels: Vec<(Arc<str>, Arc<str>)> = sample
            .labels
            .iter()
            .filter(|(name, value)| {
                if suffix == part && &**name == split {
                    at = Some(parse_bound(value));
                    false
                } else {
                    true
                }
            })
            .cloned()
            .collect();
        let index = match places.get(&labels) {
            Some(&index) => index,
            None => {
                places.insert(labels.clone(), series.len());
                series.push(Gathered {
                    labels,
                    first: sample,
                    parts: Vec::new(),
                    count: None,
                    sum: None,
                });
                series.len() - 1
            }
        };
        let gathered = &mut series[index];
        match (suffix, at) {
            (s, Some(Some(at))) if s == part => gathered.parts.push((at, sample)),
            ("_count", _) => gathered.count = Some(sample.value),
            ("_sum", _) => gathered.sum = Some(sample.value),
            _ => {}
        }
    }
    series
}

fn summary(family: &MergedFamily, served: &Served) -> Vec<Series> {
    gather(family, "", "quantile")
        .into_iter()
        // The specification drops a summary without a count; a missing sum
        // is zero.
        .filter_map(|g| {
            Some(Series {
                start: served.start_times.of(family, g.first),
                value: Value::Summary {
                    count: count_of(g.count?),
                    sum: g.sum.unwrap_or(0.0),
                    quantiles: g.parts.iter().map(|(q, s)| (*q, s.value)).collect(),
                },
                labels: g.labels,
                exemplars: Vec::new(),
            })
        })
        .collect()
}

/// A histogram family's series: an exponential histogram for each series
/// that has a native histogram, a classic one for the others.
///
/// The specification maps a Prometheus native histogram to an OTLP
/// exponential histogram and a classic one to an explicit-bucket histogram,
/// but a series here is both (multiprom's native writer records every
/// observation in the classic buckets too) and an OTLP metric has one type.
/// The native one is sent: it is what Prometheus itself keeps of a series
/// scraped with both (unless told to keep the classic buckets as well),
/// and so what the Collector's Prometheus receiver turns into an
/// exponential histogram; sending both under one name would give a
/// receiver two types for one metric identity. The classic buckets' exemplars go
/// with it. A series without a native histogram stays classic, in a second
/// metric of the same name, only in the rare family that has both.
fn histogram(family: &MergedFamily, served: &Served) -> Vec<(Kind, Vec<Series>)> {
    let mut classic = Vec::new();
    let mut exponential = Vec::new();
    for g in gather(family, "_bucket", "le") {
        let start = served.start_times.of(family, g.first);
        let exemplars: Vec<Exemplar> = g
            .parts
            .iter()
            .filter_map(|(_, sample)| sample.exemplar.as_deref().map(exemplar))
            .collect();
        if let Some(native) = served.scrape.natives.get(&family.name, &g.labels) {
            exponential.push(Series {
                labels: g.labels,
                start,
                value: Value::Exponential(native.clone()),
                exemplars,
            });
            continue;
        }
        // The specification drops a histogram without a count.
        let Some(count) = g.count else {
            continue;
        };
        let mut buckets: Vec<(f64, f64)> = g.parts.iter().map(|(le, s)| (*le, s.value)).collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut bounds = Vec::with_capacity(buckets.len());
        let mut counts = Vec::with_capacity(buckets.len() + 1);
        let mut below = 0.0;
        for (le, cumulative) in buckets {
            // Each bucket's own count: the difference from the bucket below.
            counts.push(count_of(cumulative - below));
            below = cumulative;
            if le.is_finite() {
                bounds.push(le);
            }
        }
        if counts.len() == bounds.len() {
            // No `+Inf` bucket (a histogram always has one; a foreign file
            // may not): what the count holds above the last bound.
            counts.push(count_of(count - below));
        }
        classic.push(Series {
            labels: g.labels,
            start,
            value: Value::Histogram {
                bounds,
                counts,
                count: count_of(count),
                sum: g.sum,
            },
            exemplars,
        });
    }
    let mut out = Vec::new();
    if !classic.is_empty() || exponential.is_empty() {
        out.push((Kind::Histogram, classic));
    }
    if !exponential.is_empty() {
        out.push((Kind::Exponential, exponential));
    }
    out
}

/// The suffix of `sample`'s name after its family's (`""` for the bare
/// name), if it has the family's name.
fn suffix<'a>(family: &MergedFamily, sample: &'a MergedSample) -> Option<&'a str> {
    sample.name.strip_prefix(&*family.name)
}

/// An `le` or `quantile` label's value as a number (`None` if it is not).
fn parse_bound(value: &str) -> Option<f64> {
    match value {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        _ => value.parse().ok(),
    }
}

/// A merged count (a float in the files) as OTLP's integer count.
pub(super) fn count_of(value: f64) -> u64 {
    if value > 0.0 {
        // Saturating, as `as` converts a float; counts are whole numbers,
        // rounded so that a sum of floats a hair off is not cut short.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let count = value.round() as u64;
        count
    } else {
        0
    }
}

/// A string attribute.
pub(super) fn string_attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    }
}
