//! [`OtlpEncoder`]: the served view as an `ExportMetricsServiceRequest`,
//! cumulative or delta.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use multiprom_collector::{MergedFamily, Served};
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
                    metrics.push(self.metric(family, kind, points, served.at));
                }
            }
        }
        if self.temporality == Temporality::Delta {
            // Series gone from the view are forgotten: one that comes back
            // has counted anew (its start moved).
            self.last = next;
        }
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: self.resource.clone(),
                    ..Resource::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: SCOPE_NAME.to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..InstrumentationScope::default()
                    }),
                    metrics,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
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
        points: Vec<Point>,
        at: SystemTime,
    ) -> Metric {
        let temporality = match self.temporality {
            Temporality::Cumulative => AggregationTemporality::Cumulative,
            Temporality::Delta => AggregationTemporality::Delta,
        } as i32;
        let time = nanos(at);
        let data = match kind {
            Kind::Sum => metric::Data::Sum(Sum {
                data_points: points.into_iter().map(|p| number_point(p, time)).collect(),
                aggregation_temporality: temporality,
                is_monotonic: true,
            }),
            Kind::Gauge => metric::Data::Gauge(Gauge {
                data_points: points.into_iter().map(|p| number_point(p, time)).collect(),
            }),
            Kind::Histogram => metric::Data::Histogram(Histogram {
                data_points: points
                    .into_iter()
                    .map(|p| histogram_point(p, time))
                    .collect(),
                aggregation_temporality: temporality,
            }),
            Kind::Exponential => metric::Data::ExponentialHistogram(ExponentialHistogram {
                data_points: points
                    .into_iter()
                    .map(|p| exponential_point(p, time))
                    .collect(),
                aggregation_temporality: temporality,
            }),
            Kind::Summary => metric::Data::Summary(Summary {
                data_points: points.into_iter().map(|p| summary_point(p, time)).collect(),
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

fn attributes(series: &Series) -> Vec<KeyValue> {
    series
        .labels
        .iter()
        .map(|(name, value)| string_attribute(name, value))
        .collect()
}

fn number_point((start, series): Point, time: u64) -> NumberDataPoint {
    let value = match series.value {
        Value::Number(value) => value,
        _ => f64::NAN,
    };
    NumberDataPoint {
        attributes: attributes(&series),
        start_time_unix_nano: nanos(start),
        time_unix_nano: time,
        exemplars: series.exemplars,
        flags: 0,
        value: Some(number_data_point::Value::AsDouble(value)),
    }
}

fn histogram_point((start, series): Point, time: u64) -> HistogramDataPoint {
    let mut point = HistogramDataPoint {
        attributes: attributes(&series),
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
        attributes: attributes(&series),
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
        attributes: attributes(&series),
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
