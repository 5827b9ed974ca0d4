//! Adding one process's native histogram into the merged one, in place.
//!
//! A scrape merges every worker's histogram of every series: thousands of
//! merges. [`NativeHistogram::merge`] copies its argument and sorts the
//! buckets anew each time, which is what a merge of different schemas or
//! zero buckets needs. Workers almost always share both (one config), and
//! then a merge is one walk of two sorted lists: this does that, and hands
//! anything else to [`NativeHistogram::merge`], so the result is the same.

use multiprom_format::{NativeHistogram, NativeRecord};

/// Adds `other`'s observations to `into`. `scratch` is reused between
/// calls for the merged buckets.
pub(crate) fn add_native(
    into: &mut NativeHistogram,
    other: &NativeHistogram,
    scratch: &mut Vec<(i32, u64)>,
) {
    if into.schema != other.schema || into.zero_threshold != other.zero_threshold {
        into.merge(other);
        return;
    }
    into.zero_count = into.zero_count.saturating_add(other.zero_count);
    into.nan_count = into.nan_count.saturating_add(other.nan_count);
    into.sum += other.sum;
    add_buckets(&mut into.positive, &other.positive, scratch);
    add_buckets(&mut into.negative, &other.negative, scratch);
}

/// Adds the histogram of `record` (a file's record, its buckets unsorted)
/// to `into`. When both share schema and zero bucket, each bucket is found
/// in `into`'s sorted buckets by binary search (after a few scrapes a
/// merged histogram has every bucket its workers use), so a record is
/// neither copied nor sorted; otherwise it is made a histogram in
/// `scratch_histogram` and merged as [`add_native`] does.
pub(crate) fn add_record(
    into: &mut NativeHistogram,
    record: &NativeRecord<'_>,
    scratch_histogram: &mut NativeHistogram,
    scratch: &mut Vec<(i32, u64)>,
) {
    if into.schema != record.schema || into.zero_threshold != record.zero_threshold {
        record.histogram_into(scratch_histogram);
        add_native(into, scratch_histogram, scratch);
        return;
    }
    into.zero_count = into.zero_count.saturating_add(record.zero_count);
    into.nan_count = into.nan_count.saturating_add(record.nan_count);
    into.sum += record.sum;
    for (index, negative, count) in record.buckets() {
        let buckets = if negative {
            &mut into.negative
        } else {
            &mut into.positive
        };
        match buckets.binary_search_by_key(&index, |&(i, _)| i) {
            Ok(at) => buckets[at].1 = buckets[at].1.saturating_add(count),
            Err(at) => buckets.insert(at, (index, count)),
        }
    }
}

/// Adds `from`'s buckets to `into`'s (both sorted by index, no zero
/// counts), as one walk of both.
fn add_buckets(into: &mut Vec<(i32, u64)>, from: &[(i32, u64)], scratch: &mut Vec<(i32, u64)>) {
    if from.is_empty() {
        return;
    }
    // The same buckets (a series that has seen its whole range): in place.
    if into.len() == from.len() && into.iter().zip(from).all(|(a, b)| a.0 == b.0) {
        for (a, b) in into.iter_mut().zip(from) {
            a.1 = a.1.saturating_add(b.1);
        }
        return;
    }
    scratch.clear();
    scratch.reserve(into.len() + from.len());
    let (mut a, mut b) = (into.iter().peekable(), from.iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(&&x), Some(&&y)) if x.0 == y.0 => {
                a.next();
                b.next();
                (x.0, x.1.saturating_add(y.1))
            }
            (Some(&&x), Some(&&y)) if x.0 < y.0 => {
                a.next();
                x
            }
            (_, Some(&&y)) => {
                b.next();
                y
            }
            (Some(&&x), None) => {
                a.next();
                x
            }
            (None, None) => break,
        };
        if next.1 > 0 {
            scratch.push(next);
        }
    }
    std::mem::swap(into, scratch);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Sorted buckets with no zero count, as a file or a merge gives them.
    fn buckets() -> impl Strategy<Value = Vec<(i32, u64)>> {
        proptest::collection::btree_map(-40i32..40, 1u64..1000, 0..30)
            .prop_map(|map| map.into_iter().collect())
    }

    fn histogram() -> impl Strategy<Value = NativeHistogram> {
        (
            prop_oneof![Just(3i8), Just(2i8)],
            prop_oneof![Just(0.0), Just(0.25)],
            0u64..5,
            buckets(),
            buckets(),
        )
            .prop_map(|(schema, threshold, zero_count, positive, negative)| {
                let mut h = NativeHistogram::empty(schema, threshold);
                h.zero_count = zero_count;
                h.sum = positive.len() as f64 - negative.len() as f64;
                h.positive = positive;
                h.negative = negative;
                h
            })
    }

    proptest! {
        #[test]
        fn the_same_as_the_format_crates_merge(
            histograms in proptest::collection::vec(histogram(), 1..6),
        ) {
            let mut fast = histograms[0].clone();
            let mut slow = histograms[0].clone();
            let mut scratch = Vec::new();
            for h in &histograms[1..] {
                add_native(&mut fast, h, &mut scratch);
                slow.merge(h);
            }
            prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn same_buckets_add_in_place_and_others_interleave() {
        let mut into = vec![(1, 1), (3, 2)];
        let mut scratch = Vec::new();
        add_buckets(&mut into, &[(1, 5), (3, 1)], &mut scratch);
        assert_eq!(into, vec![(1, 6), (3, 3)]);
        add_buckets(&mut into, &[(0, 1), (3, 1), (9, 4)], &mut scratch);
        assert_eq!(into, vec![(0, 1), (1, 6), (3, 4), (9, 4)]);
    }
}
