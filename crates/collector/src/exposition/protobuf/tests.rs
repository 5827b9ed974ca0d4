//! What the protobuf encoder writes, decoded with prost and read as
//! Prometheus's `ProtobufParser` reads it, is the series the text format
//! 0.0.4 serves for the same families.

use std::sync::Arc;

use multiprom_format::{write_float_to_go_string, Exemplar, GaugeMode};
use prost::Message;

use super::encode_protobuf as encode_protobuf_with_natives;
use super::schema::{Metric, MetricFamily, MetricType};
use crate::exposition::{Escaping, Format};
use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::native_histograms::NativeHistograms;

/// The protobuf encoding of `families` without native histograms, names
/// escaped with `underscores`.
fn encode_protobuf(families: &[MergedFamily], out: &mut Vec<u8>) {
    encode_protobuf_with_natives(
        families,
        &NativeHistograms::default(),
        None,
        Escaping::Underscores,
        out,
    );
}

/// A series: name, labels sorted by name, value (as bits, so NaN compares).
type Series = (String, Vec<(String, String)>, u64);

fn sample(name: &str, labels: &[(&str, &str)], value: f64) -> MergedSample {
    MergedSample {
        name: name.into(),
        labels: labels
            .iter()
            .map(|&(k, v)| (Arc::from(k), Arc::from(v)))
            .collect(),
        value,
        exemplar: None,
    }
}

fn with_exemplar(mut sample: MergedSample, value: f64, timestamp: f64) -> MergedSample {
    sample.exemplar = Some(Arc::new(Exemplar {
        labels: vec![
            ("trace_id".into(), "abc\"1".into()),
            ("span".into(), "7".into()),
        ],
        value,
        timestamp,
    }));
    sample
}

fn family(name: &str, family_type: FamilyType, samples: Vec<MergedSample>) -> MergedFamily {
    MergedFamily {
        name: name.into(),
        help: format!("Help of {name}, with \\ and\nnewline.").into(),
        family_type,
        gauge_mode: (family_type == FamilyType::Gauge).then_some(GaugeMode::All),
        samples,
    }
}

/// Every kind of family a multiprocess directory gives, and samples that fit
/// no field of their family's message.
fn families() -> Vec<MergedFamily> {
    vec![
        family(
            "requests",
            FamilyType::Counter,
            vec![
                with_exemplar(
                    sample(
                        "requests_total",
                        &[("code", "200"), ("path", "/a\"b\\c\nd")],
                        7.0,
                    ),
                    1.0,
                    1_700_000_000.5,
                ),
                sample(
                    "requests_total",
                    &[("code", "500"), ("path", "/\u{e9}")],
                    0.0,
                ),
                // Not written by prometheus_client's multiprocess mode, but
                // a file may hold anything: a series all the same.
                sample("requests_created", &[("code", "200")], 1_700_000_000.0),
            ],
        ),
        family(
            "workers",
            FamilyType::Gauge,
            vec![
                sample("workers", &[("pid", "12")], 1.5),
                sample("workers", &[("pid", "13")], f64::NAN),
                sample("workers", &[("pid", "14")], f64::NEG_INFINITY),
            ],
        ),
        family(
            "payload",
            FamilyType::Summary,
            vec![
                sample("payload_count", &[("kind", "a")], 3.0),
                sample("payload_sum", &[("kind", "a")], 12.5),
                sample("payload_count", &[("kind", "b")], 1.0),
                sample("payload_sum", &[("kind", "b")], -2.0),
            ],
        ),
        family(
            "latency",
            FamilyType::Histogram,
            vec![
                sample("latency_bucket", &[("le", "0.005"), ("route", "x")], 1.0),
                with_exemplar(
                    sample("latency_bucket", &[("le", "1e+06"), ("route", "x")], 2.0),
                    0.7,
                    1_700_000_001.25,
                ),
                sample("latency_bucket", &[("le", "+Inf"), ("route", "x")], 4.0),
                sample("latency_count", &[("route", "x")], 4.0),
                sample("latency_sum", &[("route", "x")], 1_000_123.25),
                sample("latency_bucket", &[("le", "1.0"), ("route", "y")], 0.0),
                with_exemplar(
                    sample("latency_bucket", &[("le", "+Inf"), ("route", "y")], 1.0),
                    99.0,
                    -0.25,
                ),
                sample("latency_count", &[("route", "y")], 1.0),
                sample("latency_sum", &[("route", "y")], 99.0),
                // `_count` missing: the message cannot say it, so the
                // samples are served as series of their own.
                sample("latency_bucket", &[("le", "+Inf"), ("route", "z")], 2.0),
                sample("latency_sum", &[("route", "z")], 3.0),
            ],
        ),
        // Names that are not legacy Prometheus names, escaped as in text.
        family(
            "1odd.name",
            FamilyType::Counter,
            vec![sample(
                "1odd.name_total",
                &[("a-b", "v"), ("__x", "w")],
                1.0,
            )],
        ),
        family("empty", FamilyType::Gauge, vec![]),
    ]
}

/// The series Prometheus's text parser reads from the text format (enough
/// of it for what `Format::Prometheus.encode_all` writes: escaped label values, Go
/// floats, names quoted inside the braces under `allow-utf-8`).
fn text_series(text: &str) -> Vec<Series> {
    let mut series = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (head, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap();
        let (name, labels) = match head.split_once('{') {
            None => (head.to_string(), Vec::new()),
            Some((name, rest)) => {
                let (quoted_name, labels) = text_labels(rest);
                (quoted_name.unwrap_or_else(|| name.to_string()), labels)
            }
        };
        series.push(sorted((name, labels, value.to_bits())));
    }
    series
}

/// A quoted string's content, unescaped, and what follows its closing quote.
fn quoted(after_quote: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = after_quote.char_indices();
    let end = loop {
        let (i, c) = chars.next().unwrap();
        match c {
            '"' => break i,
            '\\' => value.push(match chars.next().unwrap().1 {
                'n' => '\n',
                other => other,
            }),
            c => value.push(c),
        }
    };
    (value, &after_quote[end + 1..])
}

/// `"name",a="x","b.c"="y\"z"}` as the quoted name, if any, and the pairs.
fn text_labels(mut rest: &str) -> (Option<String>, Vec<(String, String)>) {
    let (mut name, mut labels) = (None, Vec::new());
    loop {
        rest = rest.trim_start_matches(',');
        if rest.starts_with('}') {
            return (name, labels);
        }
        let (key, after) = match rest.strip_prefix('"') {
            Some(after_quote) => quoted(after_quote),
            None => {
                let end = rest.find(['=', ',', '}']).unwrap();
                (rest[..end].to_string(), &rest[end..])
            }
        };
        match after.strip_prefix("=\"") {
            Some(value) => {
                let (value, after) = quoted(value);
                labels.push((key, value));
                rest = after;
            }
            None => {
                name = Some(key);
                rest = after;
            }
        }
    }
}

fn sorted(mut series: Series) -> Series {
    series.1.sort();
    series
}

/// Length-delimited messages, decoded.
fn decode(mut bytes: &[u8]) -> Vec<MetricFamily> {
    let mut messages = Vec::new();
    while !bytes.is_empty() {
        messages.push(MetricFamily::decode_length_delimited(&mut bytes).unwrap());
    }
    messages
}

/// A bound as the text format writes `le` and `quantile`.
fn go_float(value: f64) -> String {
    let mut out = String::new();
    write_float_to_go_string(&mut out, value);
    out
}

/// The series Prometheus's `ProtobufParser` makes of the messages
/// (model/textparse/protobufparse.go: `getMagicName`, `getMagicLabel`).
fn protobuf_series(messages: &[MetricFamily]) -> Vec<Series> {
    let mut series = Vec::new();
    for family in messages {
        let name = family.name();
        for metric in &family.metric {
            let labels: Vec<(String, String)> = metric
                .label
                .iter()
                .map(|l| (l.name().to_string(), l.value().to_string()))
                .collect();
            let mut push = |suffix: &str, extra: Option<(&str, String)>, value: f64| {
                let mut labels = labels.clone();
                labels.extend(extra.map(|(k, v)| (k.to_string(), v)));
                series.push(sorted((format!("{name}{suffix}"), labels, value.to_bits())));
            };
            match family.r#type() {
                MetricType::Counter => {
                    push("", None, metric.counter.clone().unwrap_or_default().value())
                }
                MetricType::Gauge => push("", None, metric.gauge.unwrap_or_default().value()),
                MetricType::Untyped => push("", None, metric.untyped.unwrap_or_default().value()),
                MetricType::Summary => {
                    let summary = metric.summary.clone().unwrap_or_default();
                    for q in &summary.quantile {
                        push("", Some(("quantile", go_float(q.quantile()))), q.value());
                    }
                    push("_count", None, summary.sample_count() as f64);
                    push("_sum", None, summary.sample_sum());
                }
                MetricType::Histogram | MetricType::GaugeHistogram => {
                    let histogram = metric.histogram.clone().unwrap_or_default();
                    let count = histogram.sample_count() as f64;
                    for bucket in &histogram.bucket {
                        let le = go_float(bucket.upper_bound());
                        push(
                            "_bucket",
                            Some(("le", le)),
                            bucket.cumulative_count() as f64,
                        );
                    }
                    if histogram
                        .bucket
                        .last()
                        .is_none_or(|b| b.upper_bound() != f64::INFINITY)
                    {
                        push("_bucket", Some(("le", "+Inf".into())), count);
                    }
                    push("_count", None, count);
                    push("_sum", None, histogram.sample_sum());
                }
            }
        }
    }
    series
}

#[test]
fn prometheus_reads_the_series_the_text_format_serves() {
    let families = families();
    let mut text = String::new();
    Format::Prometheus.encode(&families, &mut text);
    let mut bytes = Vec::new();
    encode_protobuf(&families, &mut bytes);
    let mut want = text_series(&text);
    let mut got = protobuf_series(&decode(&bytes));
    // Prometheus keeps series, not their order within a scrape.
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(want.len(), 22);
}

/// Under `underscores` (a scraper that names no scheme) and `allow-utf-8`
/// (Prometheus 3.0), Prometheus reads from the protobuf format the series it
/// reads from the text format under the same scheme: names escaped alike,
/// never quoted (`allow-utf-8` keeps them as they are). Under `dots` and
/// `values` names are escaped as client_golang's protobuf encoder escapes
/// them: legacy names as they are (the text encoders of `prometheus_client`
/// escape every sample name under `dots`, `latency__bucket`, which no
/// histogram message can carry).
#[test]
fn each_escaping_scheme_names_the_series_as_asked() {
    let mut families = families();
    families.push(family(
        "caf\u{e9}.orders",
        FamilyType::Counter,
        vec![sample(
            "caf\u{e9}.orders_total",
            &[("r\u{e9}gion.id", "eu")],
            2.0,
        )],
    ));
    let natives = NativeHistograms::default();
    let protobuf = |escaping| {
        let mut bytes = Vec::new();
        encode_protobuf_with_natives(&families, &natives, None, escaping, &mut bytes);
        let mut series = protobuf_series(&decode(&bytes));
        series.sort();
        series
    };
    for escaping in [Escaping::Underscores, Escaping::AllowUtf8] {
        let mut text = String::new();
        Format::Prometheus.encode_all(&[&families], escaping, &mut text);
        let mut want = text_series(&text);
        want.sort();
        assert_eq!(protobuf(escaping), want, "{escaping:?}");
        assert_eq!(want.len(), 23, "{escaping:?}");
    }
    // The names that are not legacy names, and their labels', per scheme.
    let odd = |escaping| {
        let mut names: Vec<(String, Vec<String>)> = protobuf(escaping)
            .into_iter()
            .filter(|(name, _, _)| {
                name.contains("odd") || name.starts_with("U__caf") || name.starts_with("caf")
            })
            .map(|(name, labels, _)| (name, labels.into_iter().map(|(k, _)| k).collect()))
            .collect();
        names.dedup();
        names
    };
    let pairs = |list: &[(&str, &[&str])]| -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(name, labels)| {
                (
                    name.to_string(),
                    labels.iter().map(ToString::to_string).collect(),
                )
            })
            .collect()
    };
    assert_eq!(
        odd(Escaping::AllowUtf8),
        pairs(&[
            ("1odd.name_total", &["__x", "a-b"]),
            ("caf\u{e9}.orders_total", &["r\u{e9}gion.id"]),
        ])
    );
    assert_eq!(
        odd(Escaping::Dots),
        pairs(&[
            ("__odd_dot_name__total", &["__x", "a__b"]),
            ("caf___dot_orders__total", &["r__gion_dot_id"]),
        ])
    );
    assert_eq!(
        odd(Escaping::Values),
        pairs(&[
            ("U___31_odd_2e_name__total", &["U__a_2d_b", "__x"]),
            ("U__caf_e9__2e_orders__total", &["U__r_e9_gion_2e_id"]),
        ])
    );
    // Legacy names stay as they are under every scheme.
    for escaping in [Escaping::Dots, Escaping::Values] {
        let series = protobuf(escaping);
        assert!(
            series.iter().any(|(name, _, _)| name == "latency_bucket"),
            "{escaping:?}"
        );
        assert!(
            series.iter().any(|(name, _, _)| name == "requests_total"),
            "{escaping:?}"
        );
    }
}

fn by_name<'a>(messages: &'a [MetricFamily], name: &str) -> &'a MetricFamily {
    messages
        .iter()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("no family {name}"))
}

#[test]
fn families_in_order_with_names_types_and_help() {
    let messages = {
        let mut bytes = Vec::new();
        encode_protobuf(&families(), &mut bytes);
        decode(&bytes)
    };
    let summary: Vec<(&str, MetricType, usize)> = messages
        .iter()
        .map(|m| (m.name(), m.r#type(), m.metric.len()))
        .collect();
    assert_eq!(
        summary,
        [
            // Prometheus names a counter's series after the family as it
            // is: the name carries `_total`, as in the text format.
            ("requests_total", MetricType::Counter, 2),
            ("requests_created", MetricType::Gauge, 1),
            ("workers", MetricType::Gauge, 3),
            ("payload", MetricType::Summary, 2),
            ("latency", MetricType::Histogram, 2),
            ("latency_bucket", MetricType::Untyped, 1),
            ("latency_sum", MetricType::Untyped, 1),
            ("_odd_name_total", MetricType::Counter, 1),
            // `empty` has no series: no message, as client_golang.
        ]
    );
    // Help as it is: the text format's escapes are the text's own.
    assert_eq!(
        messages[0].help(),
        "Help of requests, with \\ and\nnewline."
    );
    let odd = by_name(&messages, "_odd_name_total");
    let names: Vec<&str> = odd.metric[0].label.iter().map(|l| l.name()).collect();
    assert_eq!(names, ["a_b", "__x"]);
}

#[test]
fn histograms_carry_cumulative_buckets_and_the_inf_bucket_only_with_an_exemplar() {
    let mut bytes = Vec::new();
    encode_protobuf(&families(), &mut bytes);
    let messages = decode(&bytes);
    let latency = by_name(&messages, "latency");
    let x = latency.metric[0].histogram.clone().unwrap();
    let buckets: Vec<(f64, u64)> = x
        .bucket
        .iter()
        .map(|b| (b.upper_bound(), b.cumulative_count()))
        .collect();
    assert_eq!(buckets, [(0.005, 1), (1e6, 2)]);
    assert_eq!((x.sample_count(), x.sample_sum()), (4, 1_000_123.25));
    assert_eq!(x.sample_count_float, None);
    // No native-histogram field, so Prometheus reads a classic histogram.
    assert_eq!((x.schema, x.zero_threshold), (None, None));
    assert!(x.positive_span.is_empty() && x.negative_span.is_empty());
    let y = latency.metric[1].histogram.clone().unwrap();
    let buckets: Vec<(f64, u64, bool)> = y
        .bucket
        .iter()
        .map(|b| (b.upper_bound(), b.cumulative_count(), b.exemplar.is_some()))
        .collect();
    assert_eq!(buckets, [(1.0, 0, false), (f64::INFINITY, 1, true)]);
}

#[test]
fn exemplars_on_counters_and_buckets() {
    let mut bytes = Vec::new();
    encode_protobuf(&families(), &mut bytes);
    let messages = decode(&bytes);
    let counter = by_name(&messages, "requests_total").metric[0]
        .counter
        .clone()
        .unwrap();
    let exemplar = counter.exemplar.unwrap();
    let labels: Vec<(&str, &str)> = exemplar
        .label
        .iter()
        .map(|l| (l.name(), l.value()))
        .collect();
    assert_eq!(labels, [("span", "7"), ("trace_id", "abc\"1")]);
    assert_eq!(exemplar.value(), 1.0);
    let ts = exemplar.timestamp.unwrap();
    assert_eq!((ts.seconds, ts.nanos), (1_700_000_000, 500_000_000));
    assert!(by_name(&messages, "requests_total").metric[1]
        .counter
        .clone()
        .unwrap()
        .exemplar
        .is_none());

    let latency = by_name(&messages, "latency");
    let bucket = &latency.metric[0].histogram.clone().unwrap().bucket[1];
    let exemplar = bucket.exemplar.clone().unwrap();
    assert_eq!(exemplar.value(), 0.7);
    let ts = exemplar.timestamp.unwrap();
    assert_eq!((ts.seconds, ts.nanos), (1_700_000_001, 250_000_000));
    let inf = &latency.metric[1].histogram.clone().unwrap().bucket[1];
    let ts = inf.exemplar.clone().unwrap().timestamp.unwrap();
    assert_eq!((ts.seconds, ts.nanos), (-1, 750_000_000));
}

#[test]
fn counts_that_are_not_whole_numbers_go_in_the_float_fields() {
    let families = [family(
        "h",
        FamilyType::Histogram,
        vec![
            sample("h_bucket", &[("le", "1.0")], 0.5),
            sample("h_bucket", &[("le", "+Inf")], 2.5),
            sample("h_count", &[], 2.5),
            sample("h_sum", &[], 1.0),
        ],
    )];
    let mut bytes = Vec::new();
    encode_protobuf(&families, &mut bytes);
    let h = decode(&bytes)[0].metric[0].histogram.clone().unwrap();
    assert_eq!((h.sample_count(), h.sample_count_float), (2, Some(2.5)));
    let b = &h.bucket[0];
    assert_eq!(
        (b.cumulative_count(), b.cumulative_count_float),
        (0, Some(0.5))
    );
}

// The messages are the official schema's: a metric is a LabelPair list and
// one value message.
#[test]
fn a_gauge_metric_is_labels_and_a_gauge() {
    let mut bytes = Vec::new();
    encode_protobuf(&families()[1..2], &mut bytes);
    let workers = decode(&bytes);
    assert_eq!(
        workers[0].metric[0],
        Metric {
            label: vec![super::schema::LabelPair {
                name: Some("pid".into()),
                value: Some("12".into()),
            }],
            gauge: Some(super::schema::Gauge { value: Some(1.5) }),
            ..Metric::default()
        }
    );
}

#[test]
fn a_native_histogram_counted_as_the_classic_one_carries_the_classic_sum() {
    // Classic: 3 observations summing to 0.6 as Python adds them; native:
    // the same 3 merged in another order, one bit off.
    let classic_sum: f64 = 0.1 + 0.2 + 0.3;
    let native_sum: f64 = 0.1 + (0.2 + 0.3);
    assert_ne!(classic_sum.to_bits(), native_sum.to_bits());
    let latency = |count: f64| {
        family(
            "latency",
            FamilyType::Histogram,
            vec![
                sample("latency_bucket", &[("le", "1.0")], count),
                sample("latency_bucket", &[("le", "+Inf")], count),
                sample("latency_count", &[], count),
                sample("latency_sum", &[], classic_sum),
            ],
        )
    };
    let mut natives = NativeHistograms::default();
    let mut key = Vec::new();
    crate::native_histograms::series_key(&mut key, "latency", std::iter::empty());
    let mut native = multiprom_format::NativeHistogram::empty(3, 0.0);
    native.sum = native_sum;
    native.positive.push((-10, 3));
    natives.merge(&Arc::from(key), native, &mut Vec::new());
    let sent_sum = |count: f64| {
        let mut bytes = Vec::new();
        encode_protobuf_with_natives(
            &[latency(count)],
            &natives,
            None,
            Escaping::default(),
            &mut bytes,
        );
        let message = decode(&bytes).remove(0).metric.remove(0).histogram.unwrap();
        assert_eq!(message.sample_count(), 3, "the native count");
        message.sample_sum().to_bits()
    };
    assert_eq!(sent_sum(3.0), classic_sum.to_bits());
    // Counted otherwise (a process that records only the classic part):
    // the native sum goes with the native count.
    assert_eq!(sent_sum(4.0), native_sum.to_bits());
}

#[test]
fn counters_histograms_and_summaries_carry_their_start_as_created_timestamp() {
    use std::time::{Duration, UNIX_EPOCH};

    use crate::exposition::ProtobufCache;
    use crate::StartTimes;

    let started = StartTimes::from_epoch(UNIX_EPOCH + Duration::from_millis(1_700_000_000_250));
    let encode = |start_times: Option<&StartTimes>| {
        let mut bytes = Vec::new();
        let natives = NativeHistograms::default();
        encode_protobuf_with_natives(
            &families(),
            &natives,
            start_times,
            Escaping::Underscores,
            &mut bytes,
        );
        bytes
    };
    let messages = decode(&encode(Some(&started)));
    let created = |name: &str| -> Vec<Option<(i64, i32)>> {
        by_name(&messages, name)
            .metric
            .iter()
            .map(|m| {
                let stamp = match (&m.counter, &m.histogram, &m.summary) {
                    (Some(c), _, _) => c.created_timestamp,
                    (_, Some(h), _) => h.created_timestamp,
                    (_, _, Some(s)) => s.created_timestamp,
                    _ => None,
                };
                stamp.map(|t| (t.seconds, t.nanos))
            })
            .collect()
    };
    let at = Some((1_700_000_000, 250_000_000));
    assert_eq!(created("requests_total"), [at, at]);
    assert_eq!(created("payload"), [at, at]);
    assert_eq!(created("latency"), [at, at]);
    assert_eq!(created("workers"), [None, None, None]);
    // Without start times: none, as before.
    let mut plain = Vec::new();
    encode_protobuf(&families(), &mut plain);
    assert_eq!(encode(None), plain);
    // A cache encodes afresh when the start times move.
    let mut cache = ProtobufCache::default();
    let natives = NativeHistograms::default();
    let shared = std::sync::Arc::new(families());
    let mut first = Vec::new();
    cache.encode(
        shared.clone(),
        &natives,
        Some(&started),
        Escaping::Underscores,
        &mut first,
    );
    assert_eq!(first, encode(Some(&started)));
    let later = StartTimes::from_epoch(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    let mut second = Vec::new();
    cache.encode(
        shared,
        &natives,
        Some(&later),
        Escaping::Underscores,
        &mut second,
    );
    assert_eq!(second, encode(Some(&later)));
    assert_ne!(second, first);
}
