//! Adding one process's native histogram into the merged one, in place.
//!
//! A scrape merges every worker's histogram of every series: thousands of
//! merges, through [`NativeHistogram::merge_reusing`] with one buffer kept
//! between them; a file's record is added without being made a histogram
//! first when it shares the merged one's schema and zero bucket.

use multiprom_format::{NativeHistogram, NativeRecord};

/// Adds the histogram of `record` (a file's record, its buckets unsorted)
/// to `into`. When both share schema and zero bucket, each bucket is found
/// in `into`'s sorted buckets by binary search (after a few scrapes a
/// merged histogram has every bucket its workers use), so a record is
/// neither copied nor sorted; otherwise it is made a histogram in
/// `scratch_histogram` and merged by [`NativeHistogram::merge_reusing`].
pub(crate) fn add_record(
    into: &mut NativeHistogram,
    record: &NativeRecord<'_>,
    scratch_histogram: &mut NativeHistogram,
    scratch: &mut Vec<(i32, u64)>,
) {
    if into.schema != record.schema || into.zero_threshold != record.zero_threshold {
        record.histogram_into(scratch_histogram);
        into.merge_reusing(scratch_histogram, scratch);
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
