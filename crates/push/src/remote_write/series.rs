//! One sample line as a Remote-Write series: its name and labels as one
//! label set, its value at the collection's time, and its exemplar.

use std::sync::Arc;

use multiprom_collector::MergedSample;
use multiprom_format::Exemplar as StoredExemplar;

use super::prometheus::{Exemplar, Label, Sample, TimeSeries};
use super::timestamp::millis_of_seconds;

/// The label holding a series' metric name.
const NAME_LABEL: &str = "__name__";

/// The series of `sample`: its value at `timestamp` (milliseconds), and its
/// exemplar if it has one.
pub(super) fn sample_series(sample: &MergedSample, timestamp: i64) -> TimeSeries {
    TimeSeries {
        labels: series_labels(&sample.name, &sample.labels),
        samples: vec![Sample {
            value: sample.value,
            timestamp,
        }],
        exemplars: sample
            .exemplar
            .as_deref()
            .map(exemplar)
            .into_iter()
            .collect(),
        histograms: Vec::new(),
    }
}

/// The label set of the series `name` with `labels`: `__name__` and the
/// labels, sorted by name as the specification requires (bytewise, as Go
/// compares strings: `__name__` is not always first, an upper-case name
/// sorts before it). Labels with an empty value are left out, as the
/// specification requires and as Prometheus stores a scraped series (an
/// empty value is no label).
pub(super) fn series_labels(name: &str, labels: &[(Arc<str>, Arc<str>)]) -> Vec<Label> {
    label_pairs(name, labels).into_iter().map(label).collect()
}

/// [`series_labels`] as name and value pairs, for either version's
/// messages (Remote-Write 2.0 refers to them in its symbols table).
pub(super) fn label_pairs<'a>(
    name: &'a str,
    labels: &'a [(Arc<str>, Arc<str>)],
) -> Vec<(&'a str, &'a str)> {
    let mut set = Vec::with_capacity(labels.len() + 1);
    set.push((NAME_LABEL, name));
    set.extend(labels.iter().map(|(name, value)| (&**name, &**value)));
    sorted_without_empty(set)
}

/// `exemplar` as Prometheus stores a scraped one: its labels sorted by
/// name (empty values left out), its timestamp in milliseconds.
pub(super) fn exemplar(exemplar: &StoredExemplar) -> Exemplar {
    Exemplar {
        labels: exemplar_label_pairs(exemplar)
            .into_iter()
            .map(label)
            .collect(),
        value: exemplar.value,
        timestamp: millis_of_seconds(exemplar.timestamp),
    }
}

/// The labels of `exemplar` sorted by name, empty values left out.
pub(super) fn exemplar_label_pairs(exemplar: &StoredExemplar) -> Vec<(&str, &str)> {
    sorted_without_empty(
        exemplar
            .labels
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect(),
    )
}

fn sorted_without_empty<'a>(mut pairs: Vec<(&'a str, &'a str)>) -> Vec<(&'a str, &'a str)> {
    pairs.retain(|(_, value)| !value.is_empty());
    // Names are unique in a label set: the order is total.
    pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
    pairs
}

fn label((name, value): (&str, &str)) -> Label {
    Label {
        name: name.to_owned(),
        value: value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(labels: &[Label]) -> Vec<(&str, &str)> {
        labels
            .iter()
            .map(|label| (label.name.as_str(), label.value.as_str()))
            .collect()
    }

    fn sample(labels: &[(&str, &str)], exemplar: Option<StoredExemplar>) -> MergedSample {
        MergedSample {
            name: "requests_total".into(),
            labels: labels
                .iter()
                .map(|&(name, value)| (Arc::from(name), Arc::from(value)))
                .collect(),
            value: 7.0,
            exemplar: exemplar.map(Arc::new),
        }
    }

    #[test]
    fn the_name_joins_the_labels_in_byte_order() {
        let series = sample_series(
            &sample(&[("Zone", "eu"), ("method", "GET"), ("é", "ü")], None),
            1_000,
        );
        assert_eq!(
            pairs(&series.labels),
            [
                ("Zone", "eu"),
                ("__name__", "requests_total"),
                ("method", "GET"),
                ("é", "ü"),
            ]
        );
        assert_eq!(
            series.samples,
            [Sample {
                value: 7.0,
                timestamp: 1_000
            }]
        );
        assert!(series.exemplars.is_empty());
        assert!(series.histograms.is_empty());
    }

    #[test]
    fn empty_label_values_are_no_labels() {
        let series = sample_series(&sample(&[("method", ""), ("route", "/")], None), 0);
        assert_eq!(
            pairs(&series.labels),
            [("__name__", "requests_total"), ("route", "/")]
        );
    }

    #[test]
    fn an_exemplar_has_sorted_labels_and_milliseconds() {
        let stored = StoredExemplar {
            labels: vec![
                ("trace_id".into(), "abc".into()),
                ("span_id".into(), "12".into()),
                ("user".into(), String::new()),
            ],
            value: 0.25,
            timestamp: 1_700_000_000.5,
        };
        let series = sample_series(&sample(&[], Some(stored)), 0);
        assert_eq!(series.exemplars.len(), 1);
        let exemplar = &series.exemplars[0];
        assert_eq!(
            pairs(&exemplar.labels),
            [("span_id", "12"), ("trace_id", "abc")]
        );
        assert_eq!(exemplar.value, 0.25);
        assert_eq!(exemplar.timestamp, 1_700_000_000_500);
    }
}
