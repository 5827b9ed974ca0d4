//! [`OtlpEncoder`]: the served view as an `ExportMetricsServiceRequest`,
//! cumulative or delta.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use multiprom_collector::{FamilyType, MergedFamily, Served};

use super::delta::difference;
use super::exemplar::exemplar;
use super::points::{family_series, number_samples, string_attribute, Kind, Series, Value};
use super::proto::common::v1::InstrumentationScope;
use super::proto::metrics::v1::{
    exponential_histogram_data_point::Buckets, number_data_point,
    summary_data_point::ValueAtQuantile, AggregationTemporality, ExponentialHistogram,
    ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint,
};
use super::proto::resource::v1::Resource;
use super::time::nanos;
use super::wire;

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
    /// The request's `ResourceMetrics` without its scope metrics.
    resource: ResourceMetrics,
    /// Its `ScopeMetrics` without metrics.
    scope: ScopeMetrics,
    temporality: Temporality,
    /// When the encoder was made: a delta encoder sends nothing the first
    /// time for a series that started before.
    made: SystemTime,
    /// Delta only: each series' last cumulative value.
    last: HashMap<SeriesKey, Last>,
    /// Where requests are written.
    room: Room,
}

/// Where an encoder writes its requests, kept from one to the next (a
/// request of ten thousand series is most of a megabyte). Not state: a
/// copy of an encoder starts with none.
#[derive(Debug, Default)]
struct Room {
    /// The request.
    body: Vec<u8>,
    /// The points of one metric, before its head is known.
    points: Vec<u8>,
}

impl Clone for Room {
    fn clone(&self) -> Room {
        Room::default()
    }
}

/// A series: its family, the OTLP type it is sent as, its labels.
type SeriesKey = (Arc<str>, Kind, Vec<(Arc<str>, Arc<str>)>);

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
            resource: ResourceMetrics {
                resource: Some(Resource {
                    attributes: resource
                        .iter()
                        .map(|(key, value)| string_attribute(key, value))
                        .collect(),
                    ..Resource::default()
                }),
                scope_metrics: Vec::new(),
                schema_url: String::new(),
            },
            scope: ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: SCOPE_NAME.to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..InstrumentationScope::default()
                }),
                metrics: Vec::new(),
                schema_url: String::new(),
            },
            temporality,
            made: SystemTime::now(),
            last: HashMap::new(),
            room: Room::default(),
        }
    }

    /// The temporality it sends.
    #[must_use]
    pub fn temporality(&self) -> Temporality {
        self.temporality
    }

    /// The request for `served` as protobuf bytes (the body of an OTLP/HTTP
    /// request before any compression); delta: `served` becomes the last
    /// values.
    pub fn encode(&mut self, served: &Served) -> &[u8] {
        let time = nanos(served.at);
        let room = wire::head_room(&self.resource, &self.scope);
        let mut body = std::mem::take(&mut self.room.body);
        let mut points = std::mem::take(&mut self.room.points);
        body.clear();
        body.resize(room, 0);
        let mut next = HashMap::new();
        for family in &served.scrape.families {
            match (self.temporality, family.family_type) {
                // The bulk of most directories, written straight from the
                // samples: gauges (never deltas) and cumulative counters.
                (_, FamilyType::Gauge) | (Temporality::Cumulative, FamilyType::Counter) => {
                    let kind = if family.family_type == FamilyType::Counter {
                        Kind::Sum
                    } else {
                        Kind::Gauge
                    };
                    points.clear();
                    for sample in number_samples(family) {
                        let point = NumberDataPoint {
                            attributes: Vec::new(),
                            start_time_unix_nano: nanos(served.start_times.of(family, sample)),
                            time_unix_nano: time,
                            exemplars: sample.exemplar.iter().map(|e| exemplar(e)).collect(),
                            flags: 0,
                            value: Some(number_data_point::Value::AsDouble(sample.value)),
                        };
                        wire::put_point(
                            wire::NUMBER_ATTRIBUTES,
                            &sample.labels,
                            &point,
                            &mut points,
                        );
                    }
                    self.put_metric(family, kind, &points, &mut body);
                }
                _ => {
                    for (kind, series) in family_series(family, served) {
                        let series = match (self.temporality, kind) {
                            (
                                Temporality::Delta,
                                Kind::Sum | Kind::Histogram | Kind::Exponential,
                            ) => self.deltas(family, kind, series, served.at, &mut next),
                            _ => series.into_iter().map(|s| (s.start, s)).collect(),
                        };
                        points.clear();
                        for point in series {
                            put_series_point(point, time, &mut points);
                        }
                        self.put_metric(family, kind, &points, &mut body);
                    }
                }
            }
        }
        if self.temporality == Temporality::Delta {
            // Series gone from the view are forgotten: one that comes back
            // has counted anew (its start moved).
            self.last = next;
        }
        let start = wire::finish_request(&self.resource, &self.scope, &mut body, room);
        self.room = Room { body, points };
        &self.room.body[start..]
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

    /// `family`'s metric of `kind` with its written `points`, unless it
    /// has none (a family with no series, or a delta baseline: a metric
    /// with no points says nothing).
    fn put_metric(&self, family: &MergedFamily, kind: Kind, points: &[u8], out: &mut Vec<u8>) {
        if points.is_empty() {
            return;
        }
        let temporality = match self.temporality {
            Temporality::Cumulative => AggregationTemporality::Cumulative,
            Temporality::Delta => AggregationTemporality::Delta,
        } as i32;
        let head = Metric {
            name: family.name.to_string(),
            description: family.help.to_string(),
            ..Metric::default()
        };
        let tail = Metric {
            // The specification keeps the Prometheus type for receivers
            // that translate back.
            metadata: vec![string_attribute(
                "prometheus.type",
                family.family_type.as_str(),
            )],
            ..Metric::default()
        };
        // The field of each data type in `Metric`, and the type's message
        // without its points.
        match kind {
            Kind::Gauge => wire::put_metric(&head, 5, points, &Gauge::default(), &tail, out),
            Kind::Sum => wire::put_metric(
                &head,
                7,
                points,
                &Sum {
                    data_points: Vec::new(),
                    aggregation_temporality: temporality,
                    is_monotonic: true,
                },
                &tail,
                out,
            ),
            Kind::Histogram => wire::put_metric(
                &head,
                9,
                points,
                &Histogram {
                    data_points: Vec::new(),
                    aggregation_temporality: temporality,
                },
                &tail,
                out,
            ),
            Kind::Exponential => wire::put_metric(
                &head,
                10,
                points,
                &ExponentialHistogram {
                    data_points: Vec::new(),
                    aggregation_temporality: temporality,
                },
                &tail,
                out,
            ),
            Kind::Summary => wire::put_metric(&head, 11, points, &Summary::default(), &tail, out),
        }
    }
}

/// A series' point, written into its metric's points.
fn put_series_point((start, mut series): Point, time: u64, out: &mut Vec<u8>) {
    let labels = std::mem::take(&mut series.labels);
    let point = (start, series);
    match &point.1.value {
        Value::Number(_) => wire::put_point(
            wire::NUMBER_ATTRIBUTES,
            &labels,
            &number_point(point, time),
            out,
        ),
        Value::Histogram { .. } => wire::put_point(
            wire::HISTOGRAM_ATTRIBUTES,
            &labels,
            &histogram_point(point, time),
            out,
        ),
        Value::Exponential(_) => wire::put_point(
            wire::EXPONENTIAL_ATTRIBUTES,
            &labels,
            &exponential_point(point, time),
            out,
        ),
        Value::Summary { .. } => wire::put_point(
            wire::SUMMARY_ATTRIBUTES,
            &labels,
            &summary_point(point, time),
            out,
        ),
    }
}

/// The points below are without attributes: [`wire::put_point`] writes
/// them from the series' labels.
fn number_point((start, series): Point, time: u64) -> NumberDataPoint {
    let value = match series.value {
        Value::Number(value) => value,
        _ => f64::NAN,
    };
    NumberDataPoint {
        attributes: Vec::new(),
        start_time_unix_nano: nanos(start),
        time_unix_nano: time,
        exemplars: series.exemplars,
        flags: 0,
        value: Some(number_data_point::Value::AsDouble(value)),
    }
}

fn histogram_point((start, series): Point, time: u64) -> HistogramDataPoint {
    let mut point = HistogramDataPoint {
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

fn exponential_point((start, series): Point, time: u64) -> ExponentialHistogramDataPoint {
    let mut point = ExponentialHistogramDataPoint {
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

fn summary_point((start, series): Point, time: u64) -> SummaryDataPoint {
    let mut point = SummaryDataPoint {
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
