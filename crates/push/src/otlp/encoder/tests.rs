//! The mapping, message by message.

use std::time::{Duration, UNIX_EPOCH};

use multiprom_collector::{FamilyType, MergedSample, Scrape, ScrapeStats, StartTimes};
use multiprom_format::{Exemplar as PromExemplar, NativeHistogram};

use prost::Message;

use super::super::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use super::super::proto::common::v1::KeyValue;
use super::super::proto::metrics::v1::{exemplar, metric, Exemplar};
use super::*;

const START: u64 = 1_700_000_000_000_000_000;
const AT: u64 = START + 60_000_000_000;

fn time(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}

fn labels(pairs: &[(&str, &str)]) -> multiprom_collector::LabelSet {
    pairs
        .iter()
        .map(|(n, v)| (Arc::<str>::from(*n), Arc::<str>::from(*v)))
        .collect()
}

fn sample(name: &str, pairs: &[(&str, &str)], value: f64) -> MergedSample {
    MergedSample {
        name: name.into(),
        labels: labels(pairs),
        value,
        exemplar: None,
    }
}

fn family(name: &str, family_type: FamilyType, samples: Vec<MergedSample>) -> MergedFamily {
    MergedFamily {
        name: name.into(),
        help: format!("{name} help").into(),
        family_type,
        gauge_mode: None,
        samples,
    }
}

fn served(families: Vec<MergedFamily>, at: u64) -> Served {
    Served {
        scrape: Arc::new(Scrape {
            families,
            natives: Default::default(),
            files: Arc::from([]),
            warnings: Vec::new(),
            stats: ScrapeStats::default(),
        }),
        start_times: StartTimes::from_epoch(time(START)),
        at: time(at),
    }
}

/// The request `encoder` writes for `served`, decoded, after checking that
/// its bytes are prost's encoding of it (the fields in prost's order, every
/// length right).
fn request(encoder: &mut OtlpEncoder, served: &Served) -> ExportMetricsServiceRequest {
    let bytes = encoder.encode(served).to_vec();
    let request = ExportMetricsServiceRequest::decode(bytes.as_slice())
        .unwrap_or_else(|e| panic!("not a request: {e}"));
    assert_eq!(request.encode_to_vec(), bytes, "not prost's bytes");
    request
}

fn metrics(request: &ExportMetricsServiceRequest) -> &[Metric] {
    &request.resource_metrics[0].scope_metrics[0].metrics
}

fn attrs(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs.iter().map(|(n, v)| string_attribute(n, v)).collect()
}

fn jobs(value: f64) -> MergedFamily {
    let mut total = sample("jobs_total", &[("queue", "a")], value);
    total.exemplar = Some(Arc::new(PromExemplar {
        labels: vec![
            ("trace_id".into(), "0102030405060708090a0b0c0d0e0f10".into()),
            ("span_id".into(), "0102030405060708".into()),
        ],
        value: 1.0,
        timestamp: 1_700_000_030.0,
    }));
    family("jobs", FamilyType::Counter, vec![total])
}

fn latency(counts: [f64; 3], sum: f64) -> MergedFamily {
    let route = [("route", "/")];
    family(
        "latency_seconds",
        FamilyType::Histogram,
        vec![
            sample(
                "latency_seconds_bucket",
                &[("le", "0.1"), ("route", "/")],
                counts[0],
            ),
            sample(
                "latency_seconds_bucket",
                &[("le", "1.0"), ("route", "/")],
                counts[1],
            ),
            sample(
                "latency_seconds_bucket",
                &[("le", "+Inf"), ("route", "/")],
                counts[2],
            ),
            sample("latency_seconds_count", &route, counts[2]),
            sample("latency_seconds_sum", &route, sum),
        ],
    )
}

fn trace_exemplar() -> Exemplar {
    Exemplar {
        time_unix_nano: 1_700_000_030_000_000_000,
        trace_id: (1..=16).collect(),
        span_id: (1..=8).collect(),
        value: Some(exemplar::Value::AsDouble(1.0)),
        ..Exemplar::default()
    }
}

#[test]
fn the_resource_and_the_scope() {
    let mut encoder = OtlpEncoder::new(
        vec![("service.name".into(), "web".into())],
        Temporality::Cumulative,
    );
    let request = request(&mut encoder, &served(Vec::new(), AT));
    let resource_metrics = &request.resource_metrics;
    assert_eq!(resource_metrics.len(), 1);
    assert_eq!(
        resource_metrics[0].resource.as_ref().map(|r| &r.attributes),
        Some(&attrs(&[("service.name", "web")]))
    );
    let scope = resource_metrics[0].scope_metrics[0].scope.as_ref();
    assert_eq!(scope.map(|s| s.name.as_str()), Some("multiprom"));
    assert_eq!(
        scope.map(|s| s.version.as_str()),
        Some(env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_counter_is_a_monotonic_cumulative_sum_with_its_exemplar() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Cumulative);
    let request = request(&mut encoder, &served(vec![jobs(7.0)], AT));
    let expected = Metric {
        name: "jobs".into(),
        description: "jobs help".into(),
        unit: String::new(),
        metadata: attrs(&[("prometheus.type", "counter")]),
        data: Some(metric::Data::Sum(Sum {
            data_points: vec![NumberDataPoint {
                attributes: attrs(&[("queue", "a")]),
                start_time_unix_nano: START,
                time_unix_nano: AT,
                exemplars: vec![trace_exemplar()],
                flags: 0,
                value: Some(number_data_point::Value::AsDouble(7.0)),
            }],
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
    };
    assert_eq!(metrics(&request), [expected]);
}

#[test]
fn a_gauge_is_a_gauge() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Delta);
    let gauge = family("temp", FamilyType::Gauge, vec![sample("temp", &[], -2.5)]);
    // Never a delta, not even the first time.
    let request = request(&mut encoder, &served(vec![gauge], AT));
    assert_eq!(
        metrics(&request)[0].data,
        Some(metric::Data::Gauge(Gauge {
            data_points: vec![NumberDataPoint {
                start_time_unix_nano: START,
                time_unix_nano: AT,
                value: Some(number_data_point::Value::AsDouble(-2.5)),
                ..NumberDataPoint::default()
            }],
        }))
    );
}

#[test]
fn a_classic_histogram_has_its_own_bucket_counts_and_finite_bounds() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Cumulative);
    let mut histogram = latency([2.0, 5.0, 6.0], 4.5);
    histogram.samples[1].exemplar = jobs(0.0).samples[0].exemplar.clone();
    let request = request(&mut encoder, &served(vec![histogram], AT));
    let metric = &metrics(&request)[0];
    assert_eq!(metric.name, "latency_seconds");
    assert_eq!(metric.metadata, attrs(&[("prometheus.type", "histogram")]));
    assert_eq!(
        metric.data,
        Some(metric::Data::Histogram(Histogram {
            data_points: vec![HistogramDataPoint {
                attributes: attrs(&[("route", "/")]),
                start_time_unix_nano: START,
                time_unix_nano: AT,
                count: 6,
                sum: Some(4.5),
                bucket_counts: vec![2, 3, 1],
                explicit_bounds: vec![0.1, 1.0],
                exemplars: vec![trace_exemplar()],
                ..HistogramDataPoint::default()
            }],
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        }))
    );
}

#[test]
fn a_summary_has_its_count_and_sum() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Delta);
    let summary = family(
        "size",
        FamilyType::Summary,
        vec![
            sample("size_count", &[("x", "1")], 3.0),
            sample("size_sum", &[("x", "1")], 12.0),
        ],
    );
    let request = request(&mut encoder, &served(vec![summary], AT));
    assert_eq!(
        metrics(&request)[0].data,
        Some(metric::Data::Summary(Summary {
            data_points: vec![SummaryDataPoint {
                attributes: attrs(&[("x", "1")]),
                start_time_unix_nano: START,
                time_unix_nano: AT,
                count: 3,
                sum: 12.0,
                ..SummaryDataPoint::default()
            }],
        }))
    );
}

#[test]
fn a_native_histogram_is_an_exponential_point_with_buckets_one_lower() {
    let mut native = NativeHistogram::empty(3, 0.001);
    native.zero_count = 2;
    native.nan_count = 1;
    native.sum = 4.5;
    native.positive = vec![(-1, 3), (0, 1), (3, 2)];
    native.negative = vec![(2, 4)];
    let series = Series {
        labels: Vec::new(),
        start: time(START),
        value: Value::Exponential(native),
        exemplars: Vec::new(),
    };
    let point = exponential_point((time(START), series), AT);
    assert_eq!(
        point,
        ExponentialHistogramDataPoint {
            start_time_unix_nano: START,
            time_unix_nano: AT,
            // The zero bucket and the buckets, not the NaN observation.
            count: 12,
            sum: Some(4.5),
            scale: 3,
            zero_count: 2,
            zero_threshold: 0.001,
            positive: Some(Buckets {
                offset: -2,
                bucket_counts: vec![3, 1, 0, 0, 2],
            }),
            negative: Some(Buckets {
                offset: 1,
                bucket_counts: vec![4],
            }),
            ..ExponentialHistogramDataPoint::default()
        }
    );
}

#[test]
fn the_bucket_index_shift_is_the_specifications() {
    // At scale 0 Prometheus' bucket 1 is (1, 2] (upper bound 2^1);
    // OpenTelemetry's bucket holding (1, 2] is the one whose lower bound is
    // 2^0: index 0.
    let scale = 0;
    let base = 2f64.powf(2f64.powi(-scale));
    let prometheus_upper = |index: i32| base.powi(index);
    let otel_lower = |index: i32| base.powi(index);
    let buckets = dense_buckets(&[(1, 5)]);
    assert_eq!(buckets.offset, 0);
    assert_eq!(otel_lower(buckets.offset), prometheus_upper(1 - 1));
    assert_eq!(dense_buckets(&[]), Buckets::default());
}

#[test]
fn delta_sends_what_was_added_since_the_last_request() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Delta);
    // Series that started before the encoder: the first request is their
    // baseline.
    encoder.made = time(START + 1);
    let first = request(
        &mut encoder,
        &served(vec![jobs(7.0), latency([1.0, 2.0, 2.0], 1.0)], AT),
    );
    assert!(metrics(&first).is_empty());
    let later = AT + 60_000_000_000;
    let second = request(
        &mut encoder,
        &served(vec![jobs(10.0), latency([2.0, 5.0, 6.0], 4.5)], later),
    );
    let [counter, histogram] = metrics(&second) else {
        panic!("two metrics: {second:?}");
    };
    assert_eq!(
        counter.data,
        Some(metric::Data::Sum(Sum {
            data_points: vec![NumberDataPoint {
                attributes: attrs(&[("queue", "a")]),
                start_time_unix_nano: AT,
                time_unix_nano: later,
                // The exemplar is older than the interval.
                exemplars: Vec::new(),
                flags: 0,
                value: Some(number_data_point::Value::AsDouble(3.0)),
            }],
            aggregation_temporality: AggregationTemporality::Delta as i32,
            is_monotonic: true,
        }))
    );
    assert_eq!(
        histogram.data,
        Some(metric::Data::Histogram(Histogram {
            data_points: vec![HistogramDataPoint {
                attributes: attrs(&[("route", "/")]),
                start_time_unix_nano: AT,
                time_unix_nano: later,
                count: 4,
                sum: Some(3.5),
                bucket_counts: vec![1, 2, 1],
                explicit_bounds: vec![0.1, 1.0],
                ..HistogramDataPoint::default()
            }],
            aggregation_temporality: AggregationTemporality::Delta as i32,
        }))
    );
}

fn delta_value(request: &ExportMetricsServiceRequest) -> Option<(u64, f64)> {
    let Some(metric::Data::Sum(sum)) = &metrics(request).first()?.data else {
        return None;
    };
    let point = sum.data_points.first()?;
    match point.value {
        Some(number_data_point::Value::AsDouble(value)) => {
            Some((point.start_time_unix_nano, value))
        }
        _ => None,
    }
}

#[test]
fn delta_sends_a_whole_value_for_a_series_that_started_after_the_encoder() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Delta);
    encoder.made = time(START - 1);
    let request = request(&mut encoder, &served(vec![jobs(7.0)], AT));
    assert_eq!(delta_value(&request), Some((START, 7.0)));
    // It keeps the exemplar, taken in the interval.
    let Some(metric::Data::Sum(sum)) = &metrics(&request)[0].data else {
        panic!("a sum");
    };
    assert_eq!(sum.data_points[0].exemplars, [trace_exemplar()]);
}

#[test]
fn delta_sends_a_whole_value_after_a_reset() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Delta);
    encoder.made = time(START - 1);
    request(&mut encoder, &served(vec![jobs(7.0)], AT));
    // The series went away and counts anew from a later start.
    let restarted = START + 90_000_000_000;
    let mut view = served(vec![jobs(2.0)], AT + 120_000_000_000);
    view.start_times = StartTimes::from_epoch(time(restarted));
    assert_eq!(
        delta_value(&request(&mut encoder, &view)),
        Some((restarted, 2.0))
    );
    // A count that fell with the start unchanged: counted anew too.
    let mut view = served(vec![jobs(1.0)], AT + 180_000_000_000);
    view.start_times = StartTimes::from_epoch(time(restarted));
    assert_eq!(
        delta_value(&request(&mut encoder, &view)),
        Some((restarted, 1.0))
    );
}

#[test]
fn cumulative_repeats_the_totals() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Cumulative);
    request(&mut encoder, &served(vec![jobs(7.0)], AT));
    let request = request(&mut encoder, &served(vec![jobs(9.0)], AT + 1));
    assert_eq!(delta_value(&request), Some((START, 9.0)));
}

#[test]
fn an_empty_label_value_is_an_empty_string_attribute() {
    let mut encoder = OtlpEncoder::new(Vec::new(), Temporality::Cumulative);
    let gauge = family(
        "temp",
        FamilyType::Gauge,
        vec![sample("temp", &[("route", "")], 1.0)],
    );
    let request = request(&mut encoder, &served(vec![gauge], AT));
    let Some(metric::Data::Gauge(gauge)) = &metrics(&request)[0].data else {
        panic!("a gauge: {request:?}");
    };
    assert_eq!(gauge.data_points[0].attributes, attrs(&[("route", "")]));
}
