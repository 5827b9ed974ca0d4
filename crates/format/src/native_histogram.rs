//! [`NativeHistogram`]: the state of one native histogram series, as read
//! from a file or merged across processes, and how two are merged.

use crate::native_buckets::{bucket_upper_bound, reduce_index, MAX_SCHEMA, MIN_SCHEMA};

/// One native histogram series: Prometheus's sparse exponential buckets.
///
/// Buckets are `(index, count)` pairs sorted by index, with no zero
/// counts. The count of observations is not stored but derived
/// ([`NativeHistogram::count`]), so it always equals what the buckets
/// hold, as Prometheus requires of a native histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeHistogram {
    /// The resolution, from [`MIN_SCHEMA`] to [`MAX_SCHEMA`].
    pub schema: i8,
    /// Observations with an absolute value at most this go to the zero
    /// bucket.
    pub zero_threshold: f64,
    /// Observations in the zero bucket.
    pub zero_count: u64,
    /// NaN observations: counted, in no bucket (they make the sum NaN).
    pub nan_count: u64,
    /// The sum of all observations.
    pub sum: f64,
    /// Buckets of positive observations.
    pub positive: Vec<(i32, u64)>,
    /// Buckets of negative observations (by absolute value).
    pub negative: Vec<(i32, u64)>,
}

impl NativeHistogram {
    /// Sorts each side's buckets by index, adding up equal indices: the
    /// form every other method expects, for buckets pushed in any order.
    pub fn sort_buckets(&mut self) {
        sort_side(&mut self.positive);
        sort_side(&mut self.negative);
    }

    /// A histogram with no observations.
    #[must_use]
    pub fn empty(schema: i8, zero_threshold: f64) -> NativeHistogram {
        NativeHistogram {
            schema: schema.clamp(MIN_SCHEMA, MAX_SCHEMA),
            zero_threshold,
            zero_count: 0,
            nan_count: 0,
            sum: 0.0,
            positive: Vec::new(),
            negative: Vec::new(),
        }
    }

    /// The number of observations.
    #[must_use]
    pub fn count(&self) -> u64 {
        let buckets = |b: &[(i32, u64)]| b.iter().fold(0u64, |n, &(_, c)| n.saturating_add(c));
        self.zero_count
            .saturating_add(self.nan_count)
            .saturating_add(buckets(&self.positive))
            .saturating_add(buckets(&self.negative))
    }

    /// The number of non-empty buckets (the zero bucket not counted).
    #[must_use]
    pub fn bucket_count(&self) -> usize {
        self.positive.len() + self.negative.len()
    }

    /// Lowers the resolution to `schema` (a no-op if it is not lower),
    /// merging neighbouring buckets.
    pub fn reduce_to(&mut self, schema: i8) {
        let schema = schema.clamp(MIN_SCHEMA, MAX_SCHEMA);
        if schema >= self.schema {
            return;
        }
        let by = (self.schema - schema) as u32;
        for buckets in [&mut self.positive, &mut self.negative] {
            for bucket in buckets.iter_mut() {
                bucket.0 = reduce_index(bucket.0, by);
            }
            coalesce(buckets);
        }
        self.schema = schema;
    }

    /// Widens the zero bucket to at least `threshold`, as Prometheus does
    /// when it adds histograms: every bucket that reaches below the new
    /// threshold joins the zero bucket, and if such a bucket reaches past
    /// it, the threshold grows to that bucket's upper bound.
    pub fn widen_zero_bucket(&mut self, threshold: f64) {
        if threshold <= self.zero_threshold || threshold.is_nan() {
            return;
        }
        let mut threshold = threshold;
        loop {
            let mut widened = false;
            for buckets in [&mut self.positive, &mut self.negative] {
                // Sorted by index: the buckets below the threshold lead.
                let below = buckets
                    .iter()
                    .take_while(|&&(i, _)| {
                        bucket_upper_bound(i.saturating_sub(1), self.schema) < threshold
                    })
                    .count();
                for &(i, count) in &buckets[..below] {
                    self.zero_count = self.zero_count.saturating_add(count);
                    let upper = bucket_upper_bound(i, self.schema);
                    if upper > threshold {
                        threshold = upper;
                        widened = true;
                    }
                }
                buckets.drain(..below);
            }
            if !widened {
                break;
            }
        }
        self.zero_threshold = threshold;
    }

    /// Adds `other`'s observations: both at the coarser schema and the
    /// wider zero bucket, counts and sums added. Linear in the buckets when
    /// the two share a layout (the usual case: every process records with
    /// the same settings).
    pub fn merge(&mut self, other: &NativeHistogram) {
        self.merge_reusing(other, &mut Vec::new());
    }

    /// [`NativeHistogram::merge`], with `scratch` (kept by the caller
    /// between merges) for the merged buckets: what a collector merging
    /// thousands of histograms per scrape calls.
    pub fn merge_reusing(&mut self, other: &NativeHistogram, scratch: &mut Vec<(i32, u64)>) {
        self.reduce_to(other.schema);
        self.widen_zero_bucket(other.zero_threshold);
        let same_layout = other.schema == self.schema
            && other.zero_threshold.to_bits() == self.zero_threshold.to_bits();
        if same_layout {
            self.add_same_layout(other, scratch);
            return;
        }
        let mut other = other.clone();
        other.reduce_to(self.schema);
        other.widen_zero_bucket(self.zero_threshold);
        // Widening `other` may have widened it past this one's threshold.
        self.widen_zero_bucket(other.zero_threshold);
        self.add_same_layout(&other, scratch);
    }

    /// Adds `other`, which has this histogram's schema (and a zero
    /// threshold no wider).
    fn add_same_layout(&mut self, other: &NativeHistogram, scratch: &mut Vec<(i32, u64)>) {
        self.zero_count = self.zero_count.saturating_add(other.zero_count);
        self.nan_count = self.nan_count.saturating_add(other.nan_count);
        self.sum += other.sum;
        add_buckets(&mut self.positive, &other.positive, scratch);
        add_buckets(&mut self.negative, &other.negative, scratch);
    }
}

/// Sorts `buckets` by index and adds up the counts of equal indices.
fn coalesce(buckets: &mut Vec<(i32, u64)>) {
    buckets.sort_unstable_by_key(|&(i, _)| i);
    let mut out: Vec<(i32, u64)> = Vec::with_capacity(buckets.len());
    for &(i, c) in buckets.iter() {
        match out.last_mut() {
            Some(last) if last.0 == i => last.1 = last.1.saturating_add(c),
            _ => out.push((i, c)),
        }
    }
    out.retain(|&(_, c)| c > 0);
    *buckets = out;
}

/// Adds `from`'s buckets into `into` (both sorted by index), in one walk
/// of both, through `scratch`.
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

/// Sorts one side's buckets by index, adding up equal indices.
fn sort_side(buckets: &mut Vec<(i32, u64)>) {
    if buckets.windows(2).all(|w| w[0].0 < w[1].0) {
        return;
    }
    buckets.sort_unstable_by_key(|&(i, _)| i);
    buckets.dedup_by(|later, earlier| {
        if later.0 == earlier.0 {
            earlier.1 = earlier.1.saturating_add(later.1);
            true
        } else {
            false
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native_buckets::bucket_index;

    fn observe(h: &mut NativeHistogram, v: f64) {
        h.sum += v;
        if v.is_nan() {
            h.nan_count += 1;
        } else if v.abs() <= h.zero_threshold {
            h.zero_count += 1;
        } else {
            let side = if v > 0.0 {
                &mut h.positive
            } else {
                &mut h.negative
            };
            side.push((bucket_index(v.abs(), h.schema), 1));
            coalesce(side);
        }
    }

    #[test]
    fn merging_at_different_schemas_equals_observing_at_the_coarser() {
        let values = [
            0.002, 0.01, 0.3, 0.31, 1.0, 1.2, 5.0, -0.7, -3.0, 0.0, 1e-40,
        ];
        let mut fine = NativeHistogram::empty(5, 1e-39);
        let mut coarse = NativeHistogram::empty(2, 1e-39);
        let mut expected = NativeHistogram::empty(2, 1e-39);
        for (n, v) in values.iter().enumerate() {
            if n % 2 == 0 {
                observe(&mut fine, *v);
            } else {
                observe(&mut coarse, *v);
            }
            observe(&mut expected, *v);
        }
        fine.merge(&coarse);
        assert_eq!(fine.schema, 2);
        assert_eq!(fine.positive, expected.positive);
        assert_eq!(fine.negative, expected.negative);
        assert_eq!(fine.zero_count, expected.zero_count);
        assert_eq!(fine.count(), values.len() as u64);
    }

    #[test]
    fn a_wider_zero_bucket_takes_the_buckets_below_it() {
        let mut h = NativeHistogram::empty(0, 0.0);
        for v in [0.1, 0.6, 3.0, -0.2] {
            observe(&mut h, v);
        }
        // Bucket (0.5, 1] reaches below 0.7, so the threshold grows to 1.
        h.widen_zero_bucket(0.7);
        assert_eq!(h.zero_threshold, 1.0);
        assert_eq!(h.zero_count, 3);
        assert_eq!(h.positive, vec![(2, 1)]);
        assert!(h.negative.is_empty());
        assert_eq!(h.count(), 4);
    }

    #[test]
    fn same_buckets_add_in_place_and_others_interleave() {
        let mut into = NativeHistogram::empty(3, 0.0);
        into.positive = vec![(1, 1), (3, 2)];
        let mut other = into.clone();
        other.positive = vec![(1, 5), (3, 1)];
        let mut scratch = Vec::new();
        into.merge_reusing(&other, &mut scratch);
        assert_eq!(into.positive, vec![(1, 6), (3, 3)]);
        other.positive = vec![(0, 1), (3, 1), (9, 4)];
        other.negative = vec![(2, 7)];
        into.merge_reusing(&other, &mut scratch);
        assert_eq!(into.positive, vec![(0, 1), (1, 6), (3, 4), (9, 4)]);
        assert_eq!(into.negative, vec![(2, 7)]);
        assert_eq!(into.count(), 22);
    }

    #[test]
    fn buckets_pushed_in_any_order_are_sorted_and_equal_indices_added() {
        let mut h = NativeHistogram::empty(3, 0.0);
        h.positive = vec![(4, 1), (-2, 3), (4, 2), (0, 5)];
        h.negative = vec![(1, 1)];
        h.sort_buckets();
        assert_eq!(h.positive, vec![(-2, 3), (0, 5), (4, 3)]);
        assert_eq!(h.negative, vec![(1, 1)]);
    }
}
