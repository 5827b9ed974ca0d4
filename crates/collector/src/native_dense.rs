//! A series' native histogram merged from many records into dense counts.
//!
//! A scrape of live workers adds one record per worker per series: a
//! thousand records of some thirty buckets each, mostly the same buckets.
//! Kept as a list sorted by index, each bucket added is a search (and a
//! new one an insertion); kept here as one count per bucket index in a
//! window (per side, from an offset), each is an indexed add. Records of
//! another schema or zero bucket, or buckets too far apart for a window of
//! [`MAX_DENSE_SLOTS`], turn the merge into the sparse one
//! ([`NativeHistogram::merge_reusing`], equal to
//! [`NativeHistogram::merge`]) for the rest of the scrape, so the result is
//! always the merge of the records in the order added.

use multiprom_format::{NativeCounts, NativeHistogram};

/// The widest window of bucket indices kept dense, per side (32 KiB of
/// counts): schema 8 spans some 1,400 indices per factor of 1,000 in the
/// observations, so a series whose buckets need more is rare.
pub(crate) const MAX_DENSE_SLOTS: usize = 4096;

/// One record's worth of a series, as read from a file.
#[derive(Debug, Clone)]
pub(crate) struct RecordRead<B> {
    pub schema: i8,
    pub zero_threshold: f64,
    pub counts: NativeCounts,
    /// Its buckets with observations, `(index, negative, count)`, in any
    /// order, an index possibly twice.
    pub buckets: B,
}

/// The counts of one side, by bucket index from `offset`.
#[derive(Debug, Default)]
struct DenseSide {
    offset: i32,
    counts: Vec<u64>,
}

impl DenseSide {
    /// Adds `count` to bucket `index`; `false` if the window cannot be
    /// widened to it.
    #[inline]
    fn add(&mut self, index: i32, count: u64) -> bool {
        let slot = i64::from(index) - i64::from(self.offset);
        if let Some(cell) = usize::try_from(slot)
            .ok()
            .and_then(|slot| self.counts.get_mut(slot))
        {
            *cell = cell.saturating_add(count);
            return true;
        }
        if !self.widen(index) {
            return false;
        }
        let slot = (i64::from(index) - i64::from(self.offset)) as usize;
        self.counts[slot] = self.counts[slot].saturating_add(count);
        true
    }

    /// Widens the window to hold `index`: to the old window and `index` if
    /// that fits, else to the buckets with counts and `index`.
    #[cold]
    fn widen(&mut self, index: i32) -> bool {
        let index = i64::from(index);
        let old_low = i64::from(self.offset);
        let old_high = old_low + self.counts.len() as i64 - 1;
        let (low, high) = if self.counts.is_empty() {
            (index, index)
        } else if index.min(old_low).abs_diff(index.max(old_high)) < MAX_DENSE_SLOTS as u64 {
            (index.min(old_low), index.max(old_high))
        } else {
            let first = self.counts.iter().position(|&c| c > 0);
            let last = self.counts.iter().rposition(|&c| c > 0);
            match first.zip(last) {
                Some((first, last)) => (
                    index.min(old_low + first as i64),
                    index.max(old_low + last as i64),
                ),
                None => (index, index),
            }
        };
        if low.abs_diff(high) >= MAX_DENSE_SLOTS as u64 {
            return false;
        }
        let mut counts = vec![0u64; (high - low + 1) as usize];
        for (slot, &count) in self.counts.iter().enumerate() {
            if count > 0 {
                counts[(old_low + slot as i64 - low) as usize] = count;
            }
        }
        self.counts = counts;
        // In range: `low` is an index or above one.
        self.offset = low as i32;
        true
    }

    /// Zeroes every count, keeping the window for the next merge.
    fn clear(&mut self) {
        self.counts.fill(0);
    }

    /// The buckets with counts, sorted by index, into `out`.
    fn buckets_into(&self, out: &mut Vec<(i32, u64)>) {
        out.clear();
        out.extend(
            self.counts
                .iter()
                .enumerate()
                .filter(|&(_, &count)| count > 0)
                .map(|(slot, &count)| (self.offset + slot as i32, count)),
        );
    }
}

/// A series' records merged: dense while they fit, else sparse. Kept
/// between scrapes ([`DenseNative::clear`]) so its windows are reused.
#[derive(Debug, Default)]
pub(crate) struct DenseNative {
    records: usize,
    schema: i8,
    zero_threshold: f64,
    zero_count: u64,
    nan_count: u64,
    sum: f64,
    positive: DenseSide,
    negative: DenseSide,
    /// The merge so far, once a record did not fit the dense one.
    sparse: Option<NativeHistogram>,
    /// Whether the last merge before the last clear went sparse: records
    /// are then not added as they are loaded (they would likely not fit).
    went_sparse: bool,
}

impl DenseNative {
    /// Forgets every record added (and any bucket of a record begun).
    pub(crate) fn clear(&mut self) {
        self.positive.clear();
        self.negative.clear();
        self.records = 0;
        self.went_sparse = self.sparse.take().is_some();
    }

    /// Begins adding a record of `schema` and `zero_threshold` bucket by
    /// bucket as it is loaded ([`DenseNative::add_loaded`], then
    /// [`DenseNative::end_loaded`]); `false` if the merge cannot take it so
    /// (another schema or zero bucket, or a sparse merge): it is then to be
    /// added whole ([`DenseNative::add`]).
    pub(crate) fn begin_loaded(&mut self, schema: i8, zero_threshold: f64) -> bool {
        if self.records == 0 {
            self.schema = schema;
            self.zero_threshold = zero_threshold;
            return !self.went_sparse;
        }
        self.sparse.is_none()
            && schema == self.schema
            && zero_threshold.to_bits() == self.zero_threshold.to_bits()
    }

    /// Adds a bucket of the record begun; `false` if the windows cannot be
    /// widened to it: the merge then holds part of a record, and is to be
    /// cleared.
    #[inline]
    pub(crate) fn add_loaded(&mut self, index: i32, negative: bool, count: u64) -> bool {
        let side = if negative {
            &mut self.negative
        } else {
            &mut self.positive
        };
        side.add(index, count)
    }

    /// Ends the record begun, with its counts.
    pub(crate) fn end_loaded(&mut self, counts: NativeCounts) {
        if self.records == 0 {
            self.zero_count = counts.zero_count;
            self.nan_count = counts.nan_count;
            // The first record's sum as it is (`0.0 + -0.0` is `0.0`).
            self.sum = counts.sum;
        } else {
            self.zero_count = self.zero_count.saturating_add(counts.zero_count);
            self.nan_count = self.nan_count.saturating_add(counts.nan_count);
            self.sum += counts.sum;
        }
        self.records += 1;
    }

    /// Whether no record was added since the last clear.
    pub(crate) fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Adds `record`. `scratch_histogram`, `scratch`: reused between calls
    /// for a merge that is not dense.
    pub(crate) fn add<B: Iterator<Item = (i32, bool, u64)> + Clone>(
        &mut self,
        record: RecordRead<B>,
        scratch_histogram: &mut NativeHistogram,
        scratch: &mut Vec<(i32, u64)>,
    ) {
        if self.records == 0 {
            self.schema = record.schema;
            self.zero_threshold = record.zero_threshold;
            self.zero_count = record.counts.zero_count;
            self.nan_count = record.counts.nan_count;
            // The first record's sum as it is (`0.0 + -0.0` is `0.0`).
            self.sum = record.counts.sum;
            self.records = 1;
            if !self.add_buckets(record.buckets.clone()) {
                self.go_sparse(record, scratch_histogram);
            }
            return;
        }
        self.records += 1;
        if let Some(sparse) = &mut self.sparse {
            histogram_of(record, scratch_histogram);
            sparse.merge_reusing(scratch_histogram, scratch);
            return;
        }
        let same_layout = record.schema == self.schema
            && record.zero_threshold.to_bits() == self.zero_threshold.to_bits();
        if !same_layout {
            self.go_sparse_with(record, scratch_histogram, scratch);
            return;
        }
        // Buckets first: on a bucket out of the window, the record is
        // taken back out and merged sparse.
        let added = self.add_buckets(record.buckets.clone());
        if !added {
            self.go_sparse_with(record, scratch_histogram, scratch);
            return;
        }
        self.zero_count = self.zero_count.saturating_add(record.counts.zero_count);
        self.nan_count = self.nan_count.saturating_add(record.counts.nan_count);
        self.sum += record.counts.sum;
    }

    /// Adds `buckets` to the windows; on one that does not fit, takes
    /// those added back out and returns `false`.
    fn add_buckets(&mut self, buckets: impl Iterator<Item = (i32, bool, u64)> + Clone) -> bool {
        for (n, (index, negative, count)) in buckets.clone().enumerate() {
            if !self.add_loaded(index, negative, count) {
                self.take_back(buckets.take(n));
                return false;
            }
        }
        true
    }

    /// Takes `buckets`, just added, back out.
    fn take_back(&mut self, buckets: impl Iterator<Item = (i32, bool, u64)>) {
        for (index, negative, count) in buckets {
            let side = if negative {
                &mut self.negative
            } else {
                &mut self.positive
            };
            let slot = (i64::from(index) - i64::from(side.offset)) as usize;
            // Exact unless it saturated, and a saturated count stays so.
            if side.counts[slot] != u64::MAX {
                side.counts[slot] -= count;
            }
        }
    }

    /// The first record did not fit: the merge is its histogram.
    fn go_sparse(
        &mut self,
        record: RecordRead<impl Iterator<Item = (i32, bool, u64)>>,
        scratch_histogram: &mut NativeHistogram,
    ) {
        self.positive.clear();
        self.negative.clear();
        histogram_of(record, scratch_histogram);
        self.sparse = Some(scratch_histogram.clone());
    }

    /// `record` (counted in `records`, not added) does not fit: the merge
    /// so far becomes sparse, and `record` is merged into it.
    fn go_sparse_with(
        &mut self,
        record: RecordRead<impl Iterator<Item = (i32, bool, u64)>>,
        scratch_histogram: &mut NativeHistogram,
        scratch: &mut Vec<(i32, u64)>,
    ) {
        let mut merged = NativeHistogram::empty(self.schema, self.zero_threshold);
        self.histogram_into(&mut merged);
        self.positive.clear();
        self.negative.clear();
        histogram_of(record, scratch_histogram);
        merged.merge_reusing(scratch_histogram, scratch);
        self.sparse = Some(merged);
    }

    /// The merged histogram (`None` if no record was added).
    pub(crate) fn to_histogram(&self) -> Option<NativeHistogram> {
        if self.records == 0 {
            return None;
        }
        if let Some(sparse) = &self.sparse {
            return Some(sparse.clone());
        }
        let mut histogram = NativeHistogram::empty(self.schema, self.zero_threshold);
        self.histogram_into(&mut histogram);
        Some(histogram)
    }

    /// The dense merge as a histogram, into `into`.
    fn histogram_into(&self, into: &mut NativeHistogram) {
        into.schema = self.schema;
        into.zero_threshold = self.zero_threshold;
        into.zero_count = self.zero_count;
        into.nan_count = self.nan_count;
        into.sum = self.sum;
        self.positive.buckets_into(&mut into.positive);
        self.negative.buckets_into(&mut into.negative);
    }
}

/// `record` as a histogram (buckets sorted, equal indices added up), into
/// `into`.
fn histogram_of(
    record: RecordRead<impl Iterator<Item = (i32, bool, u64)>>,
    into: &mut NativeHistogram,
) {
    into.schema = record.schema;
    into.zero_threshold = record.zero_threshold;
    into.zero_count = record.counts.zero_count;
    into.nan_count = record.counts.nan_count;
    into.sum = record.counts.sum;
    into.positive.clear();
    into.negative.clear();
    for (index, negative, count) in record.buckets {
        let side = if negative {
            &mut into.negative
        } else {
            &mut into.positive
        };
        side.push((index, count));
    }
    into.sort_buckets();
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A record: schema, zero threshold, zero and NaN counts, sum, buckets
    /// (unsorted, an index possibly twice, now and then far from the rest).
    type Record = (i8, f64, u64, u64, f64, Vec<(i32, bool, u64)>);

    fn record() -> impl Strategy<Value = Record> {
        let index = prop_oneof![
            8 => -40i32..40,
            1 => prop_oneof![Just(-5000i32), Just(4100), Just(i32::MIN), Just(i32::MAX)],
        ];
        (
            prop_oneof![4 => Just(3i8), 1 => Just(2i8)],
            prop_oneof![4 => Just(0.0), 1 => Just(0.25)],
            0u64..5,
            0u64..3,
            -100i32..100,
            proptest::collection::vec((index, any::<bool>(), 1u64..1000), 0..30),
        )
            .prop_map(|(schema, threshold, zero, nan, sum, buckets)| {
                (schema, threshold, zero, nan, f64::from(sum) * 0.5, buckets)
            })
    }

    fn read(record: &Record) -> RecordRead<impl Iterator<Item = (i32, bool, u64)> + Clone + '_> {
        RecordRead {
            schema: record.0,
            zero_threshold: record.1,
            counts: NativeCounts {
                zero_count: record.2,
                nan_count: record.3,
                sum: record.4,
            },
            buckets: record.5.iter().copied(),
        }
    }

    proptest! {
        #[test]
        fn the_same_as_the_format_crates_merge(
            records in proptest::collection::vec(record(), 1..12),
            cleared_first in proptest::collection::vec(record(), 0..3),
        ) {
            let mut dense = DenseNative::default();
            let (mut histogram, mut scratch) = (NativeHistogram::empty(0, 0.0), Vec::new());
            // A scrape before, then cleared: its windows stay.
            for r in &cleared_first {
                dense.add(read(r), &mut histogram, &mut scratch);
            }
            dense.clear();
            prop_assert!(dense.is_empty());
            let mut expected: Option<NativeHistogram> = None;
            for r in &records {
                dense.add(read(r), &mut histogram, &mut scratch);
                let mut h = NativeHistogram::empty(0, 0.0);
                histogram_of(read(r), &mut h);
                match &mut expected {
                    Some(merged) => merged.merge(&h),
                    None => expected = Some(h),
                }
            }
            prop_assert_eq!(dense.to_histogram(), expected);
        }
    }

    #[test]
    fn buckets_far_apart_merge_sparse_and_the_same_as_a_merge() {
        let mut dense = DenseNative::default();
        let (mut histogram, mut scratch) = (NativeHistogram::empty(0, 0.0), Vec::new());
        let near = (3, 0.0, 1, 0, 1.0, vec![(1, false, 2), (-2, true, 1)]);
        let far = (3, 0.0, 0, 0, 2.0, vec![(2, false, 5), (6000, false, 1)]);
        dense.add(read(&near), &mut histogram, &mut scratch);
        dense.add(read(&far), &mut histogram, &mut scratch);
        assert!(dense.sparse.is_some());
        let merged = dense.to_histogram().unwrap();
        assert_eq!(merged.positive, vec![(1, 2), (2, 5), (6000, 1)]);
        assert_eq!(merged.negative, vec![(-2, 1)]);
        assert_eq!((merged.zero_count, merged.sum), (1, 3.0));
    }
}
