//! A merged native histogram as a Remote-Write `Histogram`: the integer
//! histogram Prometheus stores when it scrapes the series from the
//! protobuf exposition, and sends as `prompb.FromIntHistogram` makes it.

use multiprom_collector::exposition::bucket_spans_and_deltas;
use multiprom_format::NativeHistogram;

use super::prometheus::histogram::{Count, ResetHint, ZeroCount};
use super::prometheus::{BucketSpan, Histogram};
use super::v2;

/// `native` at `timestamp` (milliseconds). The spans and deltas are laid
/// out as the protobuf exposition lays them out, so that a receiver gets
/// the buckets Prometheus would have scraped. The reset hint is left
/// UNKNOWN: the receiver tells a reset from the previous histogram, as it
/// does for a scraped one.
pub(super) fn histogram(native: &NativeHistogram, timestamp: i64) -> Histogram {
    let (negative_spans, negative_deltas) = spans_and_deltas(&native.negative);
    let (positive_spans, positive_deltas) = spans_and_deltas(&native.positive);
    Histogram {
        // The histogram's own count: the zero bucket, the buckets and the
        // NaN observations, as Prometheus checks a histogram's count.
        count: Some(Count::CountInt(native.count())),
        sum: native.sum,
        schema: i32::from(native.schema),
        zero_threshold: native.zero_threshold,
        zero_count: Some(ZeroCount::ZeroCountInt(native.zero_count)),
        negative_spans,
        negative_deltas,
        negative_counts: Vec::new(),
        positive_spans,
        positive_deltas,
        positive_counts: Vec::new(),
        reset_hint: ResetHint::Unknown as i32,
        timestamp,
        custom_values: Vec::new(),
    }
}

/// `native` at `timestamp` as Remote-Write 2.0 sends it: the same
/// histogram as 1.0's (one mapping for both), with the series' start
/// (milliseconds; 0 for none).
pub(super) fn histogram_v2(native: &NativeHistogram, timestamp: i64, start: i64) -> v2::Histogram {
    let one = histogram(native, timestamp);
    let span = |span: BucketSpan| v2::BucketSpan {
        offset: span.offset,
        length: span.length,
    };
    v2::Histogram {
        count: one.count.map(|count| match count {
            Count::CountInt(n) => v2::histogram::Count::CountInt(n),
            Count::CountFloat(n) => v2::histogram::Count::CountFloat(n),
        }),
        sum: one.sum,
        schema: one.schema,
        zero_threshold: one.zero_threshold,
        zero_count: one.zero_count.map(|count| match count {
            ZeroCount::ZeroCountInt(n) => v2::histogram::ZeroCount::ZeroCountInt(n),
            ZeroCount::ZeroCountFloat(n) => v2::histogram::ZeroCount::ZeroCountFloat(n),
        }),
        negative_spans: one.negative_spans.into_iter().map(span).collect(),
        negative_deltas: one.negative_deltas,
        negative_counts: one.negative_counts,
        positive_spans: one.positive_spans.into_iter().map(span).collect(),
        positive_deltas: one.positive_deltas,
        positive_counts: one.positive_counts,
        // UNKNOWN and UNSPECIFIED are both 0: the receiver tells a reset.
        reset_hint: v2::histogram::ResetHint::Unspecified as i32,
        timestamp: one.timestamp,
        custom_values: one.custom_values,
        start_timestamp: start,
    }
}

fn spans_and_deltas(buckets: &[(i32, u64)]) -> (Vec<BucketSpan>, Vec<i64>) {
    let (spans, deltas) = bucket_spans_and_deltas(buckets);
    let spans = spans
        .into_iter()
        .map(|(offset, length)| BucketSpan { offset, length })
        .collect();
    (spans, deltas)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(offset: i32, length: u32) -> BucketSpan {
        BucketSpan { offset, length }
    }

    #[test]
    fn both_sides_the_zero_bucket_and_the_count() {
        let mut native = NativeHistogram::empty(3, 0.001);
        native.zero_count = 2;
        native.nan_count = 1;
        native.sum = 4.5;
        native.positive = vec![(-1, 3), (0, 1), (6, 2)];
        native.negative = vec![(2, 4)];
        let histogram = histogram(&native, 1_234);
        assert_eq!(histogram.count, Some(Count::CountInt(13)));
        assert_eq!(histogram.sum, 4.5);
        assert_eq!(histogram.schema, 3);
        assert_eq!(histogram.zero_threshold, 0.001);
        assert_eq!(histogram.zero_count, Some(ZeroCount::ZeroCountInt(2)));
        assert_eq!(histogram.positive_spans, [span(-1, 2), span(5, 1)]);
        assert_eq!(histogram.positive_deltas, [3, -2, 1]);
        assert_eq!(histogram.negative_spans, [span(2, 1)]);
        assert_eq!(histogram.negative_deltas, [4]);
        assert!(histogram.positive_counts.is_empty() && histogram.negative_counts.is_empty());
        assert_eq!(histogram.reset_hint(), ResetHint::Unknown);
        assert_eq!(histogram.timestamp, 1_234);
    }

    #[test]
    fn version_2_has_the_same_histogram_and_its_start() {
        let mut native = NativeHistogram::empty(3, 0.001);
        native.zero_count = 2;
        native.sum = 4.5;
        native.positive = vec![(-1, 3), (0, 1), (6, 2)];
        native.negative = vec![(2, 4)];
        let one = histogram(&native, 1_234);
        let two = histogram_v2(&native, 1_234, 1_000);
        assert_eq!(two.count, Some(v2::histogram::Count::CountInt(12)));
        assert_eq!(
            two.zero_count,
            Some(v2::histogram::ZeroCount::ZeroCountInt(2))
        );
        assert_eq!(
            (two.sum, two.schema, two.zero_threshold, two.timestamp),
            (4.5, 3, 0.001, 1_234)
        );
        let spans = |spans: &[v2::BucketSpan]| -> Vec<(i32, u32)> {
            spans.iter().map(|s| (s.offset, s.length)).collect()
        };
        assert_eq!(spans(&two.positive_spans), [(-1, 2), (5, 1)]);
        assert_eq!(spans(&two.negative_spans), [(2, 1)]);
        assert_eq!(two.positive_deltas, one.positive_deltas);
        assert_eq!(two.negative_deltas, one.negative_deltas);
        assert_eq!(two.reset_hint(), v2::histogram::ResetHint::Unspecified);
        assert_eq!(two.start_timestamp, 1_000);
    }

    #[test]
    fn an_empty_histogram_has_no_spans() {
        let histogram = histogram(&NativeHistogram::empty(0, 0.0), 0);
        assert_eq!(histogram.count, Some(Count::CountInt(0)));
        assert!(histogram.positive_spans.is_empty() && histogram.negative_spans.is_empty());
    }
}
