//! An `ExportMetricsServiceRequest`'s bytes written piece by piece, the
//! attributes of each data point straight from a sample's labels.
//!
//! Building the request as prost messages and encoding it made two
//! `String`s per label of every point and dropped them again: on a
//! directory of ten thousand series most of a push's time (the stages in
//! docs/benchmarks.md). Here every message is still prost's (its length
//! and its fields encoded by prost) except the repeated parts: a point's
//! attributes, a metric's points, the scope's metrics, written in the place
//! prost writes them, so the bytes are those of the whole request encoded
//! by prost. prost writes a message's fields by field number: a point's
//! attributes after its other fields (no field numbered above them is ever
//! set: flags, min and max) except in an exponential histogram's point,
//! where they are field 1; a metric's data (fields 5 to 11) between its
//! unit (3) and its metadata (12); the points first in their data type
//! (field 1); the metrics after the scope (fields 2 and 1 of
//! `ScopeMetrics`).

use std::sync::Arc;

use prost::encoding::key_len;
use prost::Message;

use crate::fields::{
    field_len, oneof_string_len, put_header, put_message, put_oneof_string, put_string, string_len,
};

use super::proto::metrics::v1::{Metric, ResourceMetrics, ScopeMetrics};

/// `ExportMetricsServiceRequest.resource_metrics`.
const RESOURCE_METRICS: u32 = 1;
/// `ResourceMetrics.scope_metrics`.
const SCOPE_METRICS: u32 = 2;
/// `ScopeMetrics.metrics`.
const METRICS: u32 = 2;
/// `data_points` of `Gauge`, `Sum`, `Histogram`, `ExponentialHistogram`
/// and `Summary`.
const DATA_POINTS: u32 = 1;
/// `KeyValue.key`, `KeyValue.value`, `AnyValue.string_value`.
const KEY: u32 = 1;
const VALUE: u32 = 2;
const STRING_VALUE: u32 = 1;

/// Labels, as a merged sample has them.
pub(super) type Labels = [(Arc<str>, Arc<str>)];

/// The field of a data point's attributes, and whether it is the first
/// field written or the last.
#[derive(Debug, Clone, Copy)]
pub(super) struct AttributesField {
    tag: u32,
    first: bool,
}

/// `NumberDataPoint.attributes`.
pub(super) const NUMBER_ATTRIBUTES: AttributesField = AttributesField {
    tag: 7,
    first: false,
};
/// `SummaryDataPoint.attributes`.
pub(super) const SUMMARY_ATTRIBUTES: AttributesField = AttributesField {
    tag: 7,
    first: false,
};
/// `HistogramDataPoint.attributes`.
pub(super) const HISTOGRAM_ATTRIBUTES: AttributesField = AttributesField {
    tag: 9,
    first: false,
};
/// `ExponentialHistogramDataPoint.attributes`.
pub(super) const EXPONENTIAL_ATTRIBUTES: AttributesField = AttributesField {
    tag: 1,
    first: true,
};

/// The `AnyValue` holding `value`, and the `KeyValue` of `name` and it:
/// their lengths.
fn attribute_lens(name: &str, value: &str) -> (usize, usize) {
    let any = oneof_string_len(STRING_VALUE, value);
    (any, string_len(KEY, name) + field_len(VALUE, any))
}

/// The length of `labels` as string attributes in `field`.
fn attributes_len(field: AttributesField, labels: &Labels) -> usize {
    labels
        .iter()
        .map(|(name, value)| field_len(field.tag, attribute_lens(name, value).1))
        .sum()
}

fn put_attributes(field: AttributesField, labels: &Labels, out: &mut Vec<u8>) {
    for (name, value) in labels {
        let (any, key_value) = attribute_lens(name, value);
        put_header(field.tag, key_value, out);
        put_string(KEY, name, out);
        put_header(VALUE, any, out);
        put_oneof_string(STRING_VALUE, value, out);
    }
}

/// A data point in a metric's `data_points`: `rest`, the point without
/// attributes, and `labels` as its attributes (in `field`).
pub(super) fn put_point(
    field: AttributesField,
    labels: &Labels,
    rest: &impl Message,
    out: &mut Vec<u8>,
) {
    put_header(
        DATA_POINTS,
        attributes_len(field, labels) + rest.encoded_len(),
        out,
    );
    if field.first {
        put_attributes(field, labels, out);
        put_message(rest, out);
    } else {
        put_message(rest, out);
        put_attributes(field, labels, out);
    }
}

/// A metric in the scope's `metrics`: `head` (its name, description and
/// unit), its data in `data_field` (the field of its type): `points` (the
/// written `data_points`) and `rest` (the data type's message without
/// points), and `tail` (its metadata).
pub(super) fn put_metric(
    head: &Metric,
    data_field: u32,
    points: &[u8],
    rest: &impl Message,
    tail: &Metric,
    out: &mut Vec<u8>,
) {
    let data = points.len() + rest.encoded_len();
    put_header(
        METRICS,
        head.encoded_len() + field_len(data_field, data) + tail.encoded_len(),
        out,
    );
    put_message(head, out);
    put_header(data_field, data, out);
    out.extend_from_slice(points);
    put_message(rest, out);
    put_message(tail, out);
}

/// A request's bytes: one `ResourceMetrics`, `resource` (without scope
/// metrics) and one `ScopeMetrics`, `scope` (without metrics) with
/// `metrics` (written by [`put_metric`]).
///
/// The request's head goes before the metrics, whose length it holds: the
/// metrics are written into `body` after room for the longest head
/// ([`head_room`]) and the head is written at the end of that room; the
/// request is `body` from the returned offset.
pub(super) fn finish_request(
    resource: &ResourceMetrics,
    scope: &ScopeMetrics,
    body: &mut [u8],
    room: usize,
) -> usize {
    let metrics = body.len() - room;
    let scope_len = scope.encoded_len() + metrics;
    let resource_len = resource.encoded_len() + field_len(SCOPE_METRICS, scope_len);
    let mut head = Vec::with_capacity(room);
    put_header(RESOURCE_METRICS, resource_len, &mut head);
    put_message(resource, &mut head);
    put_header(SCOPE_METRICS, scope_len, &mut head);
    put_message(scope, &mut head);
    let start = room - head.len();
    body[start..room].copy_from_slice(&head);
    start
}

/// The room [`finish_request`] needs before the metrics: the head with
/// lengths of the longest varints.
pub(super) fn head_room(resource: &ResourceMetrics, scope: &ScopeMetrics) -> usize {
    const LONGEST_VARINT: usize = 10;
    key_len(RESOURCE_METRICS)
        + LONGEST_VARINT
        + resource.encoded_len()
        + key_len(SCOPE_METRICS)
        + LONGEST_VARINT
        + scope.encoded_len()
}
