//! [`NativeHistograms`]: the native histograms of one collection, merged
//! per series, found by the family name and labels of the classic
//! histogram they belong to.
//!
//! The text formats have no room for them; the protobuf encoder looks up
//! each histogram series it writes here. Kept apart from the merged
//! families so that those, and the text output made from them, stay
//! exactly what Python's collector gives.

use std::sync::Arc;

use multiprom_format::{NativeHistogram, NativeRecord};

use crate::native_merge::add_record;

/// Merged native histograms by series (family name and labels).
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::NativeHistograms;
/// let natives = NativeHistograms::default();
/// let labels: [(Arc<str>, Arc<str>); 1] = [("route".into(), "/".into())];
/// assert!(natives.get("latency_seconds", &labels).is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct NativeHistograms {
    /// By [`series_key`]: shared with the collector's cache of what each
    /// file key names, so a scrape allocates no key. The map is shared
    /// too: a collection of settled files hands on the merge it keeps
    /// without copying it (and is told equal to the last one at a glance),
    /// and a merge into it copies it only if it is shared.
    by_series: Arc<foldhash::HashMap<Arc<[u8]>, NativeHistogram>>,
}

impl PartialEq for NativeHistograms {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.by_series, &other.by_series) || self.by_series == other.by_series
    }
}

impl NativeHistograms {
    /// The native histogram of the series `family` with `labels` (in any
    /// order; a histogram's labels without `le`).
    #[must_use]
    pub fn get(&self, family: &str, labels: &[(Arc<str>, Arc<str>)]) -> Option<&NativeHistogram> {
        if self.by_series.is_empty() {
            return None;
        }
        let mut sorted: Vec<(&str, &str)> = labels.iter().map(|(n, v)| (&**n, &**v)).collect();
        sorted.sort_unstable();
        let mut key = Vec::new();
        series_key(&mut key, family, sorted.into_iter());
        self.by_series.get(key.as_slice())
    }

    /// The number of series.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_series.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_series.is_empty()
    }

    /// Merges the histogram of `record` into the series `key` (made by
    /// [`series_key`]). `scratch_histogram`, `scratch`: reused between
    /// merges.
    pub(crate) fn merge_record(
        &mut self,
        key: &Arc<[u8]>,
        record: &NativeRecord<'_>,
        scratch_histogram: &mut NativeHistogram,
        scratch: &mut Vec<(i32, u64)>,
    ) {
        let by_series = Arc::make_mut(&mut self.by_series);
        match by_series.get_mut(&**key) {
            Some(merged) => add_record(merged, record, scratch_histogram, scratch),
            None => {
                by_series.insert(Arc::clone(key), record.to_histogram());
            }
        }
    }

    /// Merges every series of `other` into these.
    pub(crate) fn absorb(&mut self, other: NativeHistograms, scratch: &mut Vec<(i32, u64)>) {
        if self.by_series.is_empty() {
            *self = other;
            return;
        }
        let other = Arc::unwrap_or_clone(other.by_series);
        for (key, histogram) in other {
            self.merge(&key, histogram, scratch);
        }
    }

    /// Merges `histogram` into the series `key` (made by [`series_key`]):
    /// the first one read is taken as it is. `scratch`: reused between
    /// merges.
    pub(crate) fn merge(
        &mut self,
        key: &Arc<[u8]>,
        histogram: NativeHistogram,
        scratch: &mut Vec<(i32, u64)>,
    ) {
        let by_series = Arc::make_mut(&mut self.by_series);
        match by_series.get_mut(&**key) {
            Some(merged) => merged.merge_reusing(&histogram, scratch),
            None => {
                by_series.insert(Arc::clone(key), histogram);
            }
        }
    }
}

/// Appends the key of the series `family` with `labels` (sorted by name)
/// to `out`: each text length first, so that no two sequences of texts
/// give the same bytes.
pub(crate) fn series_key<'a>(
    out: &mut Vec<u8>,
    family: &str,
    labels: impl Iterator<Item = (&'a str, &'a str)>,
) {
    let mut push = |text: &str| {
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    };
    push(family);
    for (name, value) in labels {
        push(name);
        push(value);
    }
}
