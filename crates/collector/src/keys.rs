//! Distinct entry keys, each decoded once however many files hold it.
//!
//! Every worker of a pool writes the same keys: a directory of 1,000 workers
//! holds each key 1,000 times. The table maps a key's raw bytes (hashed with
//! foldhash, compared byte for byte) to a small id and keeps the decoded,
//! interned form once. Files hold ids; a key is forgotten when no file holds
//! it any more.

use std::collections::HashMap;
use std::sync::Arc;

use multiprom_format::{Key, KeyError, ReadErrorKind};

use crate::intern::{Interner, LabelTuple};
use crate::parse::parse_python_float;

/// Index of a key in a [`KeyTable`].
pub(crate) type KeyId = u32;

/// A histogram bucket's `le`: the labels without it, and `float(le)`.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pub without_le: LabelTuple,
    pub bound: f64,
}

/// One key, decoded and interned.
#[derive(Debug, Clone)]
pub(crate) struct KeyInfo {
    pub family: Arc<str>,
    pub help: Arc<str>,
    pub sample: Arc<str>,
    /// Python's `labels_key`: the key's labels sorted by name.
    pub labels: LabelTuple,
    /// `labels` without any `pid` label (gauge modes that drop the pid).
    pub labels_no_pid: LabelTuple,
    /// For keys with an `le` label: the bucket, or the `le` text that does
    /// not parse as a number (a histogram file holding it is bad).
    pub bucket: Option<Result<Bucket, String>>,
}

impl KeyInfo {
    /// Why a file of any kind holding this key is bad, if it is.
    pub(crate) fn problem(&self) -> Option<ReadErrorKind> {
        self.family
            .is_empty()
            .then_some(ReadErrorKind::BadKey(KeyError::EmptyFamilyName))
    }

    /// Why a histogram file holding this key is bad, if it is.
    pub(crate) fn histogram_problem(&self) -> Option<ReadErrorKind> {
        match &self.bucket {
            Some(Err(le)) => Some(ReadErrorKind::BadKey(KeyError::BadBucketBound(le.clone()))),
            _ => None,
        }
    }
}

type Hasher = foldhash::fast::RandomState;

/// The distinct keys of every file a collector tracks.
#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    ids: HashMap<Arc<[u8]>, KeyId, Hasher>,
    /// By id: the key (`None` for a free id) and how many entries hold it.
    keys: Vec<Option<Held>>,
    free: Vec<KeyId>,
    /// Keys forgotten so far: their decoded names and labels may now be
    /// garbage in the interner.
    forgotten: u64,
}

#[derive(Debug)]
struct Held {
    info: KeyInfo,
    /// The key as stored (shared with `ids`), to check a file's entries
    /// are still what they were.
    raw: Arc<[u8]>,
    refs: u32,
}

impl KeyTable {
    /// The id of `raw` (a key as stored), decoding it if it is new; takes one
    /// reference, to be given back with [`KeyTable::release`].
    pub(crate) fn acquire(
        &mut self,
        raw: &[u8],
        interner: &mut Interner,
    ) -> Result<KeyId, ReadErrorKind> {
        if let Some(&id) = self.ids.get(raw) {
            if let Some(Some(held)) = self.keys.get_mut(id as usize) {
                held.refs += 1;
            }
            return Ok(id);
        }
        let key = Key::decode(raw).map_err(ReadErrorKind::BadKey)?;
        let held = Held {
            info: decode(key, interner),
            raw: Arc::from(raw),
            refs: 1,
        };
        let raw = Arc::clone(&held.raw);
        let id = match self.free.pop() {
            Some(id) => {
                self.keys[id as usize] = Some(held);
                id
            }
            None => {
                self.keys.push(Some(held));
                (self.keys.len() - 1) as KeyId
            }
        };
        self.ids.insert(raw, id);
        Ok(id)
    }

    /// Takes one more reference to `id` if it is the key `raw` (the same
    /// bytes); `false` if not, or if no key has that id any more. For a
    /// caller that guessed the id (see `crate::tracked::KeyHints`): a key
    /// with the very bytes of a held one needs no decoding, no UTF-8 check
    /// and no hashing.
    pub(crate) fn acquire_same(&mut self, id: KeyId, raw: &[u8]) -> bool {
        match self.keys.get_mut(id as usize) {
            Some(Some(held)) if *held.raw == *raw => {
                held.refs += 1;
                true
            }
            _ => false,
        }
    }

    /// Gives back one reference per id in `ids`; keys nobody holds are
    /// forgotten.
    pub(crate) fn release(&mut self, ids: impl IntoIterator<Item = KeyId>) {
        for id in ids {
            let Some(slot) = self.keys.get_mut(id as usize) else {
                continue;
            };
            let Some(held) = slot else {
                continue;
            };
            held.refs -= 1;
            if held.refs == 0 {
                self.ids.remove(&*held.raw);
                *slot = None;
                self.free.push(id);
                self.forgotten += 1;
            }
        }
    }

    /// How many keys have been forgotten since the table was made.
    pub(crate) fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// The key with id `id` as stored in files.
    pub(crate) fn raw(&self, id: KeyId) -> &[u8] {
        match self.keys.get(id as usize) {
            Some(Some(held)) => &held.raw,
            _ => &[],
        }
    }

    /// The key with id `id`.
    ///
    /// # Panics
    /// For an id this table never handed out or already forgot: callers
    /// only hold ids they acquired and have not released.
    pub(crate) fn get(&self, id: KeyId) -> &KeyInfo {
        match self.keys.get(id as usize) {
            Some(Some(held)) => &held.info,
            _ => panic!("key id {id} is not held"),
        }
    }

    /// Distinct keys held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }
}

fn decode(key: Key, interner: &mut Interner) -> KeyInfo {
    let pairs: Vec<(Arc<str>, Arc<str>)> = key
        .labels
        .iter()
        .map(|(k, v)| (interner.string(k), interner.string(v)))
        .collect();
    let no_pid: Vec<_> = pairs
        .iter()
        .filter(|(k, _)| &**k != "pid")
        .cloned()
        .collect();
    let bucket =
        key.labels.iter().find(|(k, _)| k == "le").map(|(_, le)| {
            match parse_python_float(le).filter(|b| !b.is_nan()) {
                Some(bound) => {
                    let without: Vec<_> = pairs
                        .iter()
                        .filter(|(k, _)| &**k != "le")
                        .cloned()
                        .collect();
                    Ok(Bucket {
                        without_le: interner.tuple(without),
                        bound,
                    })
                }
                None => Err(le.clone()),
            }
        });
    KeyInfo {
        family: interner.string(&key.family),
        help: interner.string(&key.help),
        sample: interner.string(&key.sample),
        labels: interner.tuple(pairs),
        labels_no_pid: interner.tuple(no_pid),
        bucket,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_each_key_once_and_forgets_unheld_keys() {
        let mut table = KeyTable::default();
        let mut interner = Interner::default();
        let a = br#"["h", "h_bucket", {"le": "0.5", "x": "1"}, "H."]"#;
        let b = br#"["c", "c_total", {"pid": "7"}, "C."]"#;
        let first = table.acquire(a, &mut interner).unwrap();
        assert_eq!(table.acquire(a, &mut interner).unwrap(), first);
        let second = table.acquire(b, &mut interner).unwrap();
        assert_ne!(first, second);
        assert_eq!(table.len(), 2);
        let bucket = table.get(first).bucket.clone().unwrap().unwrap();
        assert_eq!(bucket.bound, 0.5);
        assert_eq!(bucket.without_le.len(), 1);
        assert!(table.get(second).labels_no_pid.is_empty());
        assert_eq!(table.get(second).labels.len(), 1);

        table.release([first]);
        assert_eq!(table.len(), 2, "still held once");
        table.release([first, second]);
        assert_eq!(table.len(), 0);
        // Ids are reused.
        let again = table.acquire(b, &mut interner).unwrap();
        assert!(again == first || again == second);
        assert!(matches!(
            table.acquire(b"[1, 2]", &mut interner),
            Err(ReadErrorKind::BadKey(_))
        ));
    }

    #[test]
    fn a_bucket_bound_that_is_not_a_number_is_a_histogram_problem() {
        let mut table = KeyTable::default();
        let mut interner = Interner::default();
        let id = table
            .acquire(br#"["h", "h_bucket", {"le": "nan"}, ""]"#, &mut interner)
            .unwrap();
        assert_eq!(
            table.get(id).histogram_problem(),
            Some(ReadErrorKind::BadKey(KeyError::BadBucketBound(
                "nan".into()
            )))
        );
        assert_eq!(table.get(id).problem(), None);
        let empty = table
            .acquire(br#"["", "x", {}, ""]"#, &mut interner)
            .unwrap();
        assert_eq!(
            table.get(empty).problem(),
            Some(ReadErrorKind::BadKey(KeyError::EmptyFamilyName))
        );
    }
}
