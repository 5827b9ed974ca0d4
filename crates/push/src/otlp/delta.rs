//! The difference between two cumulative values of one series.

use multiprom_format::NativeHistogram;

use super::points::Value;

/// What `now` added to `last` (both cumulative, of one series with one
/// start), or `None` if `now` is not a continuation of `last`: a count went
/// down, or the buckets are not comparable (classic bounds changed, or a
/// native histogram's resolution rose or its zero bucket narrowed). Then
/// the series counted anew, whatever the start times say.
pub(super) fn difference(now: &Value, last: &Value) -> Option<Value> {
    match (now, last) {
        (Value::Number(now), Value::Number(last)) => {
            let added = now - last;
            (added >= 0.0).then_some(Value::Number(added))
        }
        (
            Value::Histogram {
                bounds,
                counts,
                count,
                sum,
            },
            Value::Histogram {
                bounds: last_bounds,
                counts: last_counts,
                count: last_count,
                sum: last_sum,
            },
        ) => {
            if bounds != last_bounds || counts.len() != last_counts.len() {
                return None;
            }
            let counts = counts
                .iter()
                .zip(last_counts)
                .map(|(now, last)| now.checked_sub(*last))
                .collect::<Option<Vec<u64>>>()?;
            Some(Value::Histogram {
                bounds: bounds.clone(),
                counts,
                count: count.checked_sub(*last_count)?,
                sum: sum.map(|sum| sum - last_sum.unwrap_or(0.0)),
            })
        }
        (Value::Exponential(now), Value::Exponential(last)) => {
            native_difference(now, last).map(Value::Exponential)
        }
        // Summaries are not sent as deltas (OTLP's summary has no
        // temporality); two kinds never meet under one key.
        _ => None,
    }
}

/// `now - last`, bucket by bucket, `last` first brought to `now`'s
/// resolution and zero bucket (which a merge only ever lowers and widens).
fn native_difference(now: &NativeHistogram, last: &NativeHistogram) -> Option<NativeHistogram> {
    let mut last = last.clone();
    if last.schema > now.schema {
        last.reduce_to(now.schema);
    }
    if last.zero_threshold < now.zero_threshold {
        last.widen_zero_bucket(now.zero_threshold);
    }
    if last.schema != now.schema || last.zero_threshold.to_bits() != now.zero_threshold.to_bits() {
        return None;
    }
    Some(NativeHistogram {
        schema: now.schema,
        zero_threshold: now.zero_threshold,
        zero_count: now.zero_count.checked_sub(last.zero_count)?,
        nan_count: now.nan_count.checked_sub(last.nan_count)?,
        sum: now.sum - last.sum,
        positive: side_difference(&now.positive, &last.positive)?,
        negative: side_difference(&now.negative, &last.negative)?,
    })
}

/// `now - last` for one side's sorted (index, count) buckets, buckets
/// left empty dropped (a native histogram has no zero buckets).
fn side_difference(now: &[(i32, u64)], last: &[(i32, u64)]) -> Option<Vec<(i32, u64)>> {
    let mut out = Vec::with_capacity(now.len());
    let mut last = last.iter().peekable();
    for &(index, count) in now {
        let mut before = 0;
        while let Some(&&(last_index, last_count)) = last.peek() {
            if last_index > index {
                break;
            }
            if last_index < index {
                // A bucket `now` no longer has: counts went down.
                return None;
            }
            before = last_count;
            last.next();
        }
        let added = count.checked_sub(before)?;
        if added > 0 {
            out.push((index, added));
        }
    }
    // Buckets of `last` beyond `now`'s: gone, so counts went down.
    last.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(schema: i8, zero_count: u64, sum: f64, positive: &[(i32, u64)]) -> NativeHistogram {
        let mut native = NativeHistogram::empty(schema, 0.0);
        native.zero_count = zero_count;
        native.sum = sum;
        native.positive = positive.to_vec();
        native
    }

    #[test]
    fn numbers_subtract_and_a_fall_is_no_continuation() {
        assert_eq!(
            difference(&Value::Number(5.0), &Value::Number(3.0)),
            Some(Value::Number(2.0))
        );
        assert_eq!(difference(&Value::Number(1.0), &Value::Number(3.0)), None);
    }

    #[test]
    fn classic_histograms_subtract_bucket_by_bucket() {
        let histogram = |counts: Vec<u64>, count, sum| Value::Histogram {
            bounds: vec![1.0],
            counts,
            count,
            sum: Some(sum),
        };
        assert_eq!(
            difference(
                &histogram(vec![3, 1], 4, 5.0),
                &histogram(vec![1, 1], 2, 2.0)
            ),
            Some(histogram(vec![2, 0], 2, 3.0))
        );
        assert_eq!(
            difference(
                &histogram(vec![0, 1], 1, 5.0),
                &histogram(vec![1, 1], 2, 2.0)
            ),
            None
        );
        let other_bounds = Value::Histogram {
            bounds: vec![2.0],
            counts: vec![9, 9],
            count: 18,
            sum: Some(9.0),
        };
        assert_eq!(
            difference(&other_bounds, &histogram(vec![1, 1], 2, 2.0)),
            None
        );
    }

    #[test]
    fn native_histograms_subtract_bucket_by_bucket() {
        let now = native(0, 2, 10.0, &[(-1, 1), (1, 4), (3, 2)]);
        let last = native(0, 1, 4.0, &[(1, 4), (3, 1)]);
        assert_eq!(
            native_difference(&now, &last),
            Some(native(0, 1, 6.0, &[(-1, 1), (3, 1)]))
        );
        // A bucket gone, or a count down: counted anew.
        assert_eq!(
            native_difference(&native(0, 0, 1.0, &[(3, 2)]), &last),
            None
        );
        assert_eq!(
            native_difference(&native(0, 0, 1.0, &[(1, 4), (3, 2)]), &last),
            None
        );
    }

    #[test]
    fn a_lowered_resolution_lowers_the_last_value_first() {
        // Schema 1 buckets 1 and 2 are schema 0's bucket 1.
        let last = native(1, 0, 3.0, &[(1, 1), (2, 1)]);
        let now = native(0, 0, 6.0, &[(1, 3)]);
        assert_eq!(
            native_difference(&now, &last),
            Some(native(0, 0, 3.0, &[(1, 1)]))
        );
        // A raised one cannot be compared.
        assert_eq!(native_difference(&last, &now), None);
    }
}
