//! [`SeriesTable`]: the series exemplars can belong to, numbered, with
//! what each exemplar key and each merged sample resolves to.
//!
//! An exemplar belongs to the series its key names: the sample name and the
//! labels as the merge labels them (sorted, `le` as
//! `floatToGoString(float(le))`). Working that out decodes the key's JSON
//! and normalises its labels, too much to do for every entry of every
//! exemplar file on every scrape; the table does it once per distinct key
//! and hands out a number per series, so a scrape compares numbers.

use std::sync::Arc;

use multiprom_format::{float_to_go_string, Key};

use crate::family::MergedSample;
use crate::parse::parse_python_float;

/// A series' number in its [`SeriesTable`].
pub(super) type SeriesId = usize;

/// The series seen, and what keys and samples resolve to.
#[derive(Debug, Default)]
pub(super) struct SeriesTable {
    /// Each series by its name and sorted labels, encoded by [`encode`].
    ids: foldhash::HashMap<Box<[u8]>, SeriesId>,
    /// Each exemplar key seen (the raw `*.db` key), and its series: `None`
    /// for a key that names no series that may carry an exemplar. The
    /// exemplar file caches share these keys, so a key no file holds any
    /// more is one only this map holds.
    keys: foldhash::HashMap<Arc<str>, Option<SeriesId>>,
    /// The carrying samples of the last scrape, in order, with their
    /// series: a plan hands every scrape the same name and label set (the
    /// same `Arc`s) for a series, so a sample is resolved again only when
    /// those change. Holding them keeps the pointers compared valid.
    samples: Vec<(Arc<str>, crate::family::LabelSet, SeriesId)>,
    /// Series and keys still in use at the last sweep.
    live_at_sweep: (usize, usize),
    /// Reused for encoding series.
    scratch: Vec<u8>,
}

impl SeriesTable {
    /// The number of series numbered so far (every id is below it).
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The key `raw_key` as shared with the table, and its series.
    pub(super) fn resolve_key(&mut self, raw_key: &str) -> (Arc<str>, Option<SeriesId>) {
        if let Some((key, series)) = self.keys.get_key_value(raw_key) {
            return (Arc::clone(key), *series);
        }
        let series = self.series_of_key(raw_key);
        let key: Arc<str> = Arc::from(raw_key);
        self.keys.insert(Arc::clone(&key), series);
        (key, series)
    }

    fn series_of_key(&mut self, raw_key: &str) -> Option<SeriesId> {
        let key = Key::decode(raw_key.as_bytes()).ok()?;
        if !(key.sample.ends_with("_total") || key.sample.ends_with("_bucket")) {
            return None;
        }
        let mut labels = key.labels;
        for (name, value) in &mut labels {
            if name == "le" {
                // An `le` that is not a number: a file holding it is not
                // merged, so no sample has this series.
                *value = float_to_go_string(parse_python_float(value)?);
            }
        }
        labels.sort_unstable();
        let labels = labels.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        Some(self.id(&key.sample, labels))
    }

    /// The series of the `at`th carrying sample of this scrape.
    pub(super) fn resolve_sample(&mut self, at: usize, sample: &MergedSample) -> SeriesId {
        if let Some((name, labels, id)) = self.samples.get(at) {
            if Arc::ptr_eq(name, &sample.name) && Arc::ptr_eq(labels, &sample.labels) {
                return *id;
            }
        }
        let mut labels: Vec<(&str, &str)> = sample
            .labels
            .iter()
            .map(|(name, value)| (&**name, &**value))
            .collect();
        labels.sort_unstable();
        let id = self.id(&sample.name, labels.into_iter());
        let resolved = (Arc::clone(&sample.name), Arc::clone(&sample.labels), id);
        match self.samples.get_mut(at) {
            Some(kept) => *kept = resolved,
            None => self.samples.push(resolved),
        }
        id
    }

    /// Forgets the carrying samples past the first `count` (this scrape's).
    pub(super) fn keep_samples(&mut self, count: usize) {
        self.samples.truncate(count);
    }

    /// The number of the series `name` with `labels` (sorted), numbered
    /// now if it is new.
    fn id<'a>(&mut self, name: &str, labels: impl Iterator<Item = (&'a str, &'a str)>) -> SeriesId {
        self.scratch.clear();
        encode(&mut self.scratch, name);
        for (name, value) in labels {
            encode(&mut self.scratch, name);
            encode(&mut self.scratch, value);
        }
        if let Some(&id) = self.ids.get(self.scratch.as_slice()) {
            return id;
        }
        let id = self.ids.len();
        self.ids.insert(self.scratch.as_slice().into(), id);
        id
    }

    /// Whether keys and series no longer in use have piled up (files gone
    /// or rewritten, plans replaced): then the table should be started
    /// afresh, with the caches that hold its numbers. Keys only the table
    /// holds are dropped here.
    pub(super) fn wants_reset(&mut self) -> bool {
        let (series, keys) = self.live_at_sweep;
        let piled_up = |now: usize, live: usize| now > 2 * live + 1024;
        if !piled_up(self.ids.len(), series) && !piled_up(self.keys.len(), keys) {
            return false;
        }
        self.keys.retain(|key, _| Arc::strong_count(key) > 1);
        let mut used = vec![false; self.ids.len()];
        let ids = self.keys.values().flatten();
        for &id in ids.chain(self.samples.iter().map(|(_, _, id)| id)) {
            if let Some(used) = used.get_mut(id) {
                *used = true;
            }
        }
        let live = used.iter().filter(|used| **used).count();
        self.live_at_sweep = (live, self.keys.len());
        piled_up(self.ids.len(), live)
    }
}

/// Appends `text` to `out`, length first, so that an encoded sequence of
/// texts is never that of another sequence.
fn encode(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use multiprom_format::encode_key;

    use super::*;

    fn sample(name: &str, labels: &[(&str, &str)]) -> MergedSample {
        MergedSample {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(n, v)| ((*n).into(), (*v).into()))
                .collect(),
            value: 1.0,
            exemplar: None,
        }
    }

    #[test]
    fn a_key_resolves_to_the_series_of_the_sample_it_is_merged_into() {
        let mut table = SeriesTable::default();
        let key = encode_key("wait", "wait_bucket", [("le", "1"), ("a", "x")], "Wait.");
        let (_, series) = table.resolve_key(&key);
        let merged = sample("wait_bucket", &[("a", "x"), ("le", "1.0")]);
        assert_eq!(series, Some(table.resolve_sample(0, &merged)));
        let other = sample("wait_bucket", &[("a", "y"), ("le", "1.0")]);
        assert_ne!(series, Some(table.resolve_sample(1, &other)));
        // Names and values are told apart however they split.
        let a = encode_key("c", "c_total", [("ab", "c")], "");
        let b = encode_key("c", "c_total", [("a", "bc")], "");
        assert_ne!(table.resolve_key(&a).1, table.resolve_key(&b).1);

        for key in [
            encode_key("busy", "busy", [], "Busy."),
            encode_key("wait", "wait_sum", [], "Wait."),
            encode_key("wait", "wait_bucket", [("le", "soon")], "Wait."),
            "not json".to_owned(),
        ] {
            assert_eq!(table.resolve_key(&key).1, None, "{key}");
        }
    }

    #[test]
    fn keys_no_file_holds_any_more_pile_up_to_a_reset() {
        let mut table = SeriesTable::default();
        let held: Vec<_> = (0..10)
            .map(|i| table.resolve_key(&encode_key("c", "c_total", [("i", &*i.to_string())], "")))
            .collect();
        assert!(!table.wants_reset());
        for i in 10..3000 {
            table.resolve_key(&encode_key("c", "c_total", [("i", &*i.to_string())], ""));
        }
        assert!(table.wants_reset());
        assert_eq!(table.keys.len(), held.len());
    }
}
