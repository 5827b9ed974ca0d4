//! Key hints: the keys of the last file of each kind, to recognise the
//! same keys at the same offsets in the next file by one comparison.

use multiprom_format::layout::{self, HEADER_LEN};
use multiprom_format::MetricKind;

use super::EntryRef;
use crate::keys::KeyTable;

/// The keys of the last file of each kind parsed from its start, in file
/// order.
///
/// Every worker of a pool writes the same metrics, mostly in the same
/// order, so a file's entries usually sit at the offsets of the last file
/// of its kind and hold the very same key bytes. Comparing those bytes with
/// the key the table holds costs one `memcmp`, where looking the key up
/// costs a UTF-8 check, a hash and a probe of the table: the biggest share
/// of parsing a directory's files for the first time. A hint that does not
/// match costs that comparison at most, and the entry is then looked up as
/// without hints; a hint's key that was forgotten since (its id free or
/// reused) fails the comparison. Hints hold no references: the table may
/// forget their keys at any time.
#[derive(Debug, Default)]
pub(crate) struct KeyHints {
    by_kind: Vec<(MetricKind, Vec<EntryRef>)>,
}

impl KeyHints {
    /// The entries of the last file of `kind` parsed from its start.
    pub(super) fn of(&self, kind: MetricKind) -> &[EntryRef] {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[], |(_, entries)| entries)
    }

    /// Remembers `entries`, a file of `kind` parsed from its start.
    pub(super) fn remember(&mut self, kind: MetricKind, entries: &[EntryRef]) {
        match self.by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, hint)) => {
                hint.clear();
                hint.extend_from_slice(entries);
            }
            None => self.by_kind.push((kind, entries.to_vec())),
        }
    }
}

/// The entry at `pos` of `bytes` (a file's bytes from its start), taking a
/// reference to its key, if it holds the key of the hint entry at the same
/// offset. `cursor` is where to look in `hint`; it only moves forward, as
/// `pos` does.
pub(super) fn hinted_entry(
    bytes: &[u8],
    pos: usize,
    hint: &[EntryRef],
    cursor: &mut usize,
    keys: &mut KeyTable,
) -> Option<EntryRef> {
    loop {
        let entry = hint.get(*cursor)?;
        // A hint's entries are contiguous from the header on.
        let start = match cursor.checked_sub(1) {
            None => HEADER_LEN,
            Some(before) => hint[before].value_at as usize + layout::VALUE_PAIR_LEN,
        };
        if start > pos {
            return None;
        }
        *cursor += 1;
        if start < pos {
            continue;
        }
        let len = keys.raw(entry.key).len();
        let end = pos + layout::entry_len(len);
        let framed = bytes.get(pos..end)?;
        if len == 0 || framed[..4] != (len as u32).to_le_bytes() {
            return None;
        }
        return keys
            .acquire_same(entry.key, &framed[4..4 + len])
            .then(|| EntryRef {
                key: entry.key,
                value_at: layout::value_offset(pos, len) as u32,
            });
    }
}
