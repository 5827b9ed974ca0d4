//! [`OtlpEncoder`]: the served view as an `ExportMetricsServiceRequest`,
//! cumulative or delta.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use multiprom_collector::{MergedFamily, Served};
use prost::encoding::{
    self, encode_key, encode_varint, encoded_len_varint, key_len, message, WireType,
};
use prost::Message;

use super::delta::difference;
use super::points::{family_series, string_attribute, Kind, Series, Value};
use super::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use super::proto::common::v1::{InstrumentationScope, KeyValue};
use super::proto::metrics::v1::{
    exponential_histogram_data_point::Buckets, metric, number_data_point,
    summary_data_point::ValueAtQuantile, AggregationTemporality, ExponentialHistogram,
    ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint,
};
use super::proto::resource::v1::Resource;
use super::time::nanos;

/// The instrumentation scope of every metric sent: the entity that
/// translates Prometheus metrics to OTLP, as the specification asks for
/// metrics with no `otel_scope_` labels.
const SCOPE_NAME: &str = "multiprom";

/// How counters and histograms are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Temporality {
    /// Each point is the total since the series started
    /// (`start_time_unix_nano`), as Prometheus counts.
    #[default]
    Cumulative,
    /// Each point is what was added since the last request (see
    /// [`OtlpEncoder`] for the first one).
    Delta,
}

/// Encodes served views as OTLP requests, one per push.
///
/// With [`Temporality::Cumulative`] each request stands alone. With
/// [`Temporality::Delta`] the encoder keeps each series' last cumulative
/// value (so a pusher keeps one encoder, and keeps its state only when a
/// push is accepted) and each sum or histogram point is what was added
/// since the last request, from that request's time:
/// * a series whose start time moved since (it went down or away and
///   counted anew, see [`multiprom_collector::StartTimes`]), or whose
///   count fell, sends its whole value from its new start;
/// * a series new to the encoder that started after the encoder was made
///   sends its whole value from its start;
/// * a series new to the encoder that started before it was made sends
///   nothing in the first request that has it, only becomes the baseline
///   of the next: this is the first interval after a restart of multiprom,
///   whose counts before the restart were already sent by the previous
///   process, or never will be; sending them whole would count them twice.
///
/// Exemplars of a delta point are only those taken in its interval.
/// Gauges are never deltas, and neither are summaries (OTLP's summary has
/// no temporality: its count and sum are cumulative). A delta point is sent
/// for every series each time, even when nothing was added (zero), so a
/// receiver sees the series live; OpenTelemetry SDKs leave such series out.
///
/// ```
/// use multiprom_collector::{DirCollector, Exemplars, Natives, ServedView};
/// use multiprom_push::otlp::{OtlpEncoder, Temporality};
/// let mut encoder = OtlpEncoder::new(vec![("service.name".into(), "web".into())], Temporality::Delta);
/// let dir = tempfile::tempdir()?;
/// let view = ServedView::new(DirCollector::new(dir.path()));
/// let body = encoder.encode(&view.collect_all(Natives::Merge, Exemplars::Attach)?);
/// assert!(!body.is_empty()); // the resource and the scope, with no metrics
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct OtlpEncoder {
    resource: Vec<KeyValue>,
    temporality: Temporality,
    /// When the encoder was made: a delta encoder sends nothing the first
    /// time for a series that started before.
    made: SystemTime,
    /// Delta only: each series' last cumulative value.
    last: HashMap<SeriesKey, Last>,
}

/// A series: its family, the OTLP type it is sent as, its labels.
type SeriesKey = (Arc<str>, Kind, Vec<(Arc<str>, Arc<str>)>);

/// A series' attributes: their field, and the addresses of its family's
/// name and of its first sample's label set (shared from collection to
/// collection while a series lives).
type LabelsKey = (u32, usize, usize);

/// Each series' encoded data point attributes, kept between requests by
/// [`OtlpEncoder::encode_cached`] (one per pusher).
#[derive(Debug, Default)]
pub struct AttributeCache {
    /// By the attributes' field and the series' labels.
    encoded: foldhash::HashMap<LabelsKey, Vec<u8>>,
    /// The collection the addresses point into: kept so that none of them
    /// can be reused by other labels while cached.
    scrape: Option<Arc<multiprom_collector::Scrape>>,
    /// Metrics in the last request (room for the next).
    last_len: usize,
}

/// A series' value at the last request.
#[derive(Debug, Clone)]
struct Last {
    start: SystemTime,
    at: SystemTime,
    value: Value,
}

/// One point to send: its start and its value.
type Point = (SystemTime, Series);

impl OtlpEncoder {
    /// An encoder sending `resource`'s attributes (`service.name` and the
    /// like, as given) with `temporality`.
    #[must_use]
    pub fn new(resource: Vec<(String, String)>, temporality: Temporality) -> Self {
        OtlpEncoder {
            resource: resource
                .iter()
                .map(|(key, value)| string_attribute(key, value))
                .collect(),
            temporality,
            made: SystemTime::now(),
            last: HashMap::new(),
        }
    }

    /// The temporality it sends.
    #[must_use]
    pub fn temporality(&self) -> Temporality {
        self.temporality
    }

    /// The request for `served` (delta: and `served` becomes the last
    /// values).
    pub fn request(&mut self, served: &Served) -> ExportMetricsServiceRequest {
        let metrics = self
            .points(served)
            .into_iter()
            .map(|(family, kind, points)| {
                let points = points
                    .into_iter()
                    .map(|point| {
                        let attributes = attributes(&point.1);
                        (point, attributes)
                    })
                    .collect();
                self.metric(family, kind, points, served.at)
            })
            .collect();
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(self.resource()),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(scope()),
                    metrics,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }

    /// The request for `served` as protobuf bytes, as [`OtlpEncoder::encode`]
    /// makes them but with each data point's attributes taken from `cache`
    /// (encoded once per series, not built anew each time: two `String`s
    /// per label): the same request once decoded, its fields perhaps in
    /// another order.
    pub fn encode_cached(&mut self, served: &Served, cache: &mut AttributeCache) -> Vec<u8> {
        let mut kept = foldhash::HashMap::with_capacity_and_hasher(
            cache.encoded.len(),
            foldhash::fast::RandomState::default(),
        );
        let mut metrics = Vec::with_capacity(cache.last_len);
        for (family, kind, points) in self.points(served) {
            let field = attributes_field(kind);
            let points = points
                .into_iter()
                .map(|point| {
                    let key: LabelsKey = (field, family.name.as_ptr() as usize, point.1.origin);
                    let bytes = cache.encoded.remove(&key).unwrap_or_else(|| {
                        let mut bytes = Vec::new();
                        for attribute in attributes(&point.1) {
                            message::encode(field, &attribute, &mut bytes);
                        }
                        bytes
                    });
                    let point = (point, Vec::new());
                    (point, (key, bytes))
                })
                .collect::<Vec<_>>();
            let (points, attributes): (Vec<_>, Vec<_>) = points.into_iter().unzip();
            let mut metric = self.metric(family, kind, points, served.at);
            // The points' attributes go in by hand, before each point's
            // other fields (a field's place in a message is free).
            let data = metric.data.take();
            let mut data_bytes = Vec::new();
            let data_field = match &data {
                Some(metric::Data::Gauge(gauge)) => {
                    write_points(&gauge.data_points, &attributes, &mut data_bytes);
                    5
                }
                Some(metric::Data::Sum(sum)) => {
                    write_points(&sum.data_points, &attributes, &mut data_bytes);
                    encoding::int32::encode(2, &sum.aggregation_temporality, &mut data_bytes);
                    encoding::bool::encode(3, &sum.is_monotonic, &mut data_bytes);
                    7
                }
                Some(metric::Data::Histogram(histogram)) => {
                    write_points(&histogram.data_points, &attributes, &mut data_bytes);
                    encoding::int32::encode(2, &histogram.aggregation_temporality, &mut data_bytes);
                    9
                }
                Some(metric::Data::ExponentialHistogram(histogram)) => {
                    write_points(&histogram.data_points, &attributes, &mut data_bytes);
                    encoding::int32::encode(2, &histogram.aggregation_temporality, &mut data_bytes);
                    10
                }
                Some(metric::Data::Summary(summary)) => {
                    write_points(&summary.data_points, &attributes, &mut data_bytes);
                    11
                }
                None => 0,
            };
            for (key, encoded) in attributes {
                kept.insert(key, encoded);
            }
            metrics.push((metric.encode_to_vec(), data_field, data_bytes));
        }
        cache.encoded = kept;
        cache.last_len = metrics.len();
        cache.scrape = Some(Arc::clone(&served.scrape));
        // The body is written once, its lengths known first: each level
        // of nesting copied into the next would copy it all again.
        let field_len =
            |field: u32, len: usize| key_len(field) + encoded_len_varint(len as u64) + len;
        let metric_len = |(header, field, data): &(Vec<u8>, u32, Vec<u8>)| {
            header.len()
                + if *field == 0 {
                    0
                } else {
                    field_len(*field, data.len())
                }
        };
        let scope = scope();
        let resource = self.resource();
        let scope_metrics_len = message::encoded_len(1, &scope)
            + metrics
                .iter()
                .map(|m| field_len(2, metric_len(m)))
                .sum::<usize>();
        let resource_metrics_len =
            message::encoded_len(1, &resource) + field_len(2, scope_metrics_len);
        let mut out = Vec::with_capacity(field_len(1, resource_metrics_len));
        // The request: its one resource's metrics (field 1); the resource,
        // then its scope's metrics (field 2); the scope, then each metric
        // (field 2): its header, then its data.
        encode_key(1, WireType::LengthDelimited, &mut out);
        encode_varint(resource_metrics_len as u64, &mut out);
        message::encode(1, &resource, &mut out);
        encode_key(2, WireType::LengthDelimited, &mut out);
        encode_varint(scope_metrics_len as u64, &mut out);
        message::encode(1, &scope, &mut out);
        for metric in &metrics {
            encode_key(2, WireType::LengthDelimited, &mut out);
            encode_varint(metric_len(metric) as u64, &mut out);
            let (header, field, data) = metric;
            out.extend_from_slice(header);
            if *field != 0 {
                encode_key(*field, WireType::LengthDelimited, &mut out);
                encode_varint(data.len() as u64, &mut out);
                out.extend_from_slice(data);
            }
        }
        out
    }

    /// Each family's points to send, by the OTLP type they are sent as
    /// (delta: and `served` becomes the last values).
    fn points<'a>(&mut self, served: &'a Served) -> Vec<(&'a MergedFamily, Kind, Vec<Point>)> {
        let mut metrics = Vec::with_capacity(served.scrape.families.len());
        let mut next = HashMap::new();
        for family in &served.scrape.families {
            for (kind, series) in family_series(family, served) {
                let points = match (self.temporality, kind) {
                    (Temporality::Delta, Kind::Sum | Kind::Histogram | Kind::Exponential) => {
                        self.deltas(family, kind, series, served.at, &mut next)
                    }
                    _ => series.into_iter().map(|s| (s.start, s)).collect(),
                };
                // A metric with no points (a family with no series, or a
                // delta baseline) says nothing.
                if !points.is_empty() {
                    metrics.push((family, kind, points));
                }
            }
        }
        if self.temporality == Temporality::Delta {
            // Series gone from the view are forgotten: one that comes back
            // has counted anew (its start moved).
            self.last = next;
        }
        metrics
    }

    fn resource(&self) -> Resource {
        Resource {
            attributes: self.resource.clone(),
            ..Resource::default()
        }
    }

    /// The request for `served` as protobuf bytes (the body of an OTLP/HTTP
    /// request before any compression).
    pub fn encode(&mut self, served: &Served) -> Vec<u8> {
        self.request(served).encode_to_vec()
    }

    /// The delta points of `series`, noting each one's value in `next`.
    fn deltas(
        &self,
        family: &MergedFamily,
        kind: Kind,
        series: Vec<Series>,
        at: SystemTime,
        next: &mut HashMap<SeriesKey, Last>,
    ) -> Vec<Point> {
        let mut points = Vec::with_capacity(series.len());
        for mut s in series {
            let key = (family.name.clone(), kind, s.labels.clone());
            let last = self.last.get(&key);
            next.insert(
                key,
                Last {
                    start: s.start,
                    at,
                    value: s.value.clone(),
                },
            );
            let start = match last {
                Some(last) if last.start == s.start => match difference(&s.value, &last.value) {
                    Some(added) => {
                        s.value = added;
                        last.at
                    }
                    None => s.start,
                },
                Some(_) => s.start,
                None if s.start >= self.made => s.start,
                None => continue,
            };
            let from = nanos(start);
            s.exemplars.retain(|e| e.time_unix_nano >= from);
            points.push((start, s));
        }
        points
    }

    fn metric(
        &self,
        family: &MergedFamily,
        kind: Kind,
        points: Vec<(Point, Vec<KeyValue>)>,
        at: SystemTime,
    ) -> Metric {
        let temporality = match self.temporality {
            Temporality::Cumulative => AggregationTemporality::Cumulative,
            Temporality::Delta => AggregationTemporality::Delta,
        } as i32;
        let time = nanos(at);
        let data = match kind {
            Kind::Sum => metric::Data::Sum(Sum {
                data_points: points
                    .into_iter()
                    .map(|(p, a)| number_point(p, a, time))
                    .collect(),
                aggregation_temporality: temporality,
                is_monotonic: true,
            }),
            Kind::Gauge => metric::Data::Gauge(Gauge {
                data_points: points
                    .into_iter()
                    .map(|(p, a)| number_point(p, a, time))
                    .collect(),
            }),
            Kind::Histogram => metric::Data::Histogram(Histogram {
                data_points: points
                    .into_iter()
                    .map(|(p, a)| histogram_point(p, a, time))
                    .collect(),
                aggregation_temporality: temporality,
            }),
            Kind::Exponential => metric::Data::ExponentialHistogram(ExponentialHistogram {
                data_points: points
                    .into_iter()
                    .map(|(p, a)| exponential_point(p, a, time))
                    .collect(),
                aggregation_temporality: temporality,
            }),
            Kind::Summary => metric::Data::Summary(Summary {
                data_points: points
                    .into_iter()
                    .map(|(p, a)| summary_point(p, a, time))
                    .collect(),
            }),
        };
        Metric {
            name: family.name.to_string(),
            description: family.help.to_string(),
            unit: String::new(),
            // The specification keeps the Prometheus type for receivers
            // that translate back.
            metadata: vec![string_attribute(
                "prometheus.type",
                family.family_type.as_str(),
            )],
            data: Some(data),
        }
    }
}

/// The instrumentation scope of every request.
fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE_NAME.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    }
}

/// The field of a data point's attributes, by the type it is sent as.
fn attributes_field(kind: Kind) -> u32 {
    match kind {
        Kind::Sum | Kind::Gauge | Kind::Summary => 7,
        Kind::Histogram => 9,
        Kind::Exponential => 1,
    }
}

/// Appends each of `points` as field 1 (`data_points`), its `attributes`
/// bytes first.
fn write_points<M: Message>(points: &[M], attributes: &[(LabelsKey, Vec<u8>)], out: &mut Vec<u8>) {
    for (point, (_, attributes)) in points.iter().zip(attributes) {
        encode_key(1, WireType::LengthDelimited, out);
        encode_varint((attributes.len() + point.encoded_len()) as u64, out);
        out.extend_from_slice(attributes);
        point.encode_raw(out);
    }
}

fn attributes(series: &Series) -> Vec<KeyValue> {
    series
        .labels
        .iter()
        .map(|(name, value)| string_attribute(name, value))
        .collect()
}

fn number_point((start, series): Point, attributes: Vec<KeyValue>, time: u64) -> NumberDataPoint {
    let value = match series.value {
        Value::Number(value) => value,
        _ => f64::NAN,
    };
    NumberDataPoint {
        attributes,
        start_time_unix_nano: nanos(start),
        time_unix_nano: time,
        exemplars: series.exemplars,
        flags: 0,
        value: Some(number_data_point::Value::AsDouble(value)),
    }
}

fn histogram_point(
    (start, series): Point,
    attributes: Vec<KeyValue>,
    time: u64,
) -> HistogramDataPoint {
    let mut point = HistogramDataPoint {
        attributes,
        start_time_unix_nano: nanos(start),
        time_unix_nano: time,
        ..HistogramDataPoint::default()
    };
    if let Value::Histogram {
        bounds,
        counts,
        count,
        sum,
    } = series.value
    {
        point.count = count;
        point.sum = sum;
        point.bucket_counts = counts;
        point.explicit_bounds = bounds;
    }
    point.exemplars = series.exemplars;
    point
}

fn exponential_point(
    (start, series): Point,
    attributes: Vec<KeyValue>,
    time: u64,
) -> ExponentialHistogramDataPoint {
    let mut point = ExponentialHistogramDataPoint {
        attributes,
        start_time_unix_nano: nanos(start),
        time_unix_nano: time,
        ..ExponentialHistogramDataPoint::default()
    };
    if let Value::Exponential(native) = series.value {
        // The specification's count: the zero bucket and the buckets; NaN
        // observations are in no bucket (they only make the sum NaN).
        point.count = native.count().saturating_sub(native.nan_count);
        point.sum = Some(native.sum);
        point.scale = i32::from(native.schema);
        point.zero_count = native.zero_count;
        point.zero_threshold = native.zero_threshold;
        point.positive = Some(dense_buckets(&native.positive));
        point.negative = Some(dense_buckets(&native.negative));
    }
    point.exemplars = series.exemplars;
    point
}

/// Sparse (index, count) buckets, sorted, as OTLP's dense buckets.
///
/// Prometheus' bucket `i` holds (base^(i-1), base^i], upper bound
/// inclusive; OpenTelemetry's bucket `i` holds (base^i, base^(i+1)], so
/// the same bucket is one lower in OpenTelemetry's numbering: the offset
/// is the first Prometheus index minus one, as the specification says
/// (`PositiveSpans[0].Offset-1`). Empty buckets between are zeros.
pub(super) fn dense_buckets(sparse: &[(i32, u64)]) -> Buckets {
    let (Some(&(first, _)), Some(&(last, _))) = (sparse.first(), sparse.last()) else {
        return Buckets::default();
    };
    let width = usize::try_from(i64::from(last) - i64::from(first) + 1).unwrap_or(0);
    let mut bucket_counts = vec![0u64; width];
    for &(index, count) in sparse {
        if let Some(slot) = usize::try_from(i64::from(index) - i64::from(first))
            .ok()
            .and_then(|at| bucket_counts.get_mut(at))
        {
            *slot = slot.saturating_add(count);
        }
    }
    Buckets {
        offset: first - 1,
        bucket_counts,
    }
}

fn summary_point((start, series): Point, attributes: Vec<KeyValue>, time: u64) -> SummaryDataPoint {
    let mut point = SummaryDataPoint {
        attributes,
        start_time_unix_nano: nanos(start),
        time_unix_nano: time,
        ..SummaryDataPoint::default()
    };
    if let Value::Summary {
        count,
        sum,
        quantiles,
    } = series.value
    {
        point.count = count;
        point.sum = sum;
        point.quantile_values = quantiles
            .into_iter()
            .map(|(quantile, value)| ValueAtQuantile { quantile, value })
            .collect();
    }
    point
}

#[cfg(test)]
mod tests;
