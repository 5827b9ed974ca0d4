//! A merged native histogram in a `Histogram` message's native fields, as
//! client_golang writes them (prometheus/histogram.go, `makeBuckets`), so
//! Prometheus reads the series back as the native histogram it is.

use multiprom_format::NativeHistogram;

use super::schema::{self, BucketSpan};

/// Sets the native fields of `message` from `native`: schema, zero bucket,
/// both sides' spans and deltas, and the count and sum (the native
/// histogram's own, so that the count is exactly the zero bucket, the
/// buckets and the NaN observations, as Prometheus checks).
pub(super) fn set_native_fields(message: &mut schema::Histogram, native: &NativeHistogram) {
    message.schema = Some(i32::from(native.schema));
    message.zero_threshold = Some(native.zero_threshold);
    message.zero_count = Some(native.zero_count);
    message.sample_count = Some(native.count());
    message.sample_count_float = None;
    message.sample_sum = Some(native.sum);
    (message.positive_span, message.positive_delta) = spans_and_deltas(&native.positive);
    (message.negative_span, message.negative_delta) = spans_and_deltas(&native.negative);
    if message.positive_span.is_empty() && message.negative_span.is_empty() {
        // A histogram with no bucket would otherwise read as a classic one
        // (client_golang writes this no-op span for the same reason).
        message.positive_span.push(BucketSpan {
            offset: Some(0),
            length: Some(0),
        });
    }
}

/// The spans and deltas of `buckets`, as [`bucket_spans_and_deltas`]
/// gives them, as the message's spans.
pub(super) fn spans_and_deltas(buckets: &[(i32, u64)]) -> (Vec<BucketSpan>, Vec<i64>) {
    let (spans, deltas) = bucket_spans_and_deltas(buckets);
    let spans = spans
        .into_iter()
        .map(|(offset, length)| BucketSpan {
            offset: Some(offset),
            length: Some(length),
        })
        .collect();
    (spans, deltas)
}

/// The spans, as `(offset, length)`, and the deltas of one side's buckets
/// of a native histogram (`(index, count)` sorted by index, counts above
/// zero, as [`NativeHistogram`] keeps them), laid out as client_golang lays
/// them out (prometheus/histogram.go, `makeBuckets`), so that every
/// protocol that carries native histograms as spans and deltas (the
/// protobuf exposition, Remote-Write) carries the same ones.
///
/// A new span starts only at a gap of more than two buckets; smaller gaps
/// are filled with empty buckets (fewer bytes than a span of their own).
/// The first span's offset is the first bucket's index, each later one's
/// the gap since the end of the span before. Each delta is the bucket's
/// count less the previous bucket's (the first bucket's less zero).
///
/// ```
/// use multiprom_collector::exposition::bucket_spans_and_deltas;
/// // Buckets 0 and 1, then 3 (a gap of one, filled), then 9 (a new span).
/// let (spans, deltas) = bucket_spans_and_deltas(&[(0, 2), (1, 5), (3, 1), (9, 4)]);
/// assert_eq!(spans, vec![(0, 4), (5, 1)]);
/// assert_eq!(deltas, vec![2, 3, -5, 1, 3]);
/// ```
#[must_use]
pub fn bucket_spans_and_deltas(buckets: &[(i32, u64)]) -> (Vec<(i32, u32)>, Vec<i64>) {
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut deltas = Vec::with_capacity(buckets.len());
    let mut previous = 0i64;
    let mut next_index = 0i32;
    for (n, &(index, count)) in buckets.iter().enumerate() {
        // Wrapping as client_golang's int64 arithmetic does; counts past
        // i64::MAX are beyond any real histogram.
        #[allow(clippy::cast_possible_wrap)]
        let count = count as i64;
        let gap = index.wrapping_sub(next_index);
        match spans.last_mut() {
            Some(span) if n > 0 && gap <= 2 => {
                for _ in 0..gap {
                    deltas.push(-previous);
                    previous = 0;
                }
                span.1 += gap.unsigned_abs();
            }
            _ => spans.push((gap, 0)),
        }
        if let Some(span) = spans.last_mut() {
            span.1 += 1;
        }
        deltas.push(count.wrapping_sub(previous));
        previous = count;
        next_index = index.wrapping_add(1);
    }
    (spans, deltas)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(offset: i32, length: u32) -> BucketSpan {
        BucketSpan {
            offset: Some(offset),
            length: Some(length),
        }
    }

    #[test]
    fn gaps_of_up_to_two_buckets_are_filled_and_longer_ones_start_a_span() {
        // Gaps of 0, 1, 2 and 3 buckets after the first.
        let buckets = [(-2, 3), (-1, 5), (1, 1), (4, 2), (8, 7)];
        let (spans, deltas) = spans_and_deltas(&buckets);
        assert_eq!(spans, vec![span(-2, 7), span(3, 1)]);
        // -2:3 -1:5 0:0 1:1 2:0 3:0 4:2 | 8:7
        assert_eq!(deltas, vec![3, 2, -5, 1, -1, 0, 2, 5]);
    }

    #[test]
    fn the_first_span_starts_at_the_first_index() {
        let (spans, deltas) = spans_and_deltas(&[(17, 4)]);
        assert_eq!(spans, vec![span(17, 1)]);
        assert_eq!(deltas, vec![4]);
        assert_eq!(spans_and_deltas(&[]), (vec![], vec![]));
    }

    #[test]
    fn negative_buckets_and_the_zero_bucket() {
        let mut native = NativeHistogram::empty(3, 0.001);
        native.zero_count = 2;
        native.nan_count = 1;
        native.sum = f64::NAN;
        native.negative = vec![(0, 1), (5, 2)];
        let mut message = schema::Histogram::default();
        set_native_fields(&mut message, &native);
        assert_eq!(message.schema, Some(3));
        assert_eq!(message.zero_threshold, Some(0.001));
        assert_eq!(message.zero_count, Some(2));
        assert_eq!(message.sample_count, Some(6));
        assert!(message.sample_sum.is_some_and(f64::is_nan));
        assert_eq!(message.negative_span, vec![span(0, 1), span(4, 1)]);
        assert_eq!(message.negative_delta, vec![1, 1]);
        // Buckets on one side only: no no-op span on the other.
        assert!(message.positive_span.is_empty());
        assert!(message.positive_delta.is_empty());
    }

    #[test]
    fn an_empty_histogram_gets_a_no_op_span() {
        let mut message = schema::Histogram::default();
        set_native_fields(&mut message, &NativeHistogram::empty(3, 0.0));
        assert_eq!(message.positive_span, vec![span(0, 0)]);
        assert!(message.positive_delta.is_empty());
        assert!(message.negative_span.is_empty());
        assert_eq!(message.sample_count, Some(0));
        assert_eq!(message.zero_threshold, Some(0.0));
    }
}
