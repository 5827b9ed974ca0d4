//! An entry as a tracked file keeps it, and the check that admits its key.

use multiprom_format::{MetricKind, ParseError};

use crate::intern::Interner;
use crate::keys::{KeyId, KeyTable};

/// One entry: its key and where its value is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryRef {
    pub key: KeyId,
    pub value_at: u32,
}

/// Looks a raw key up (decoding it if new) and checks it suits a file of
/// `kind`; on a problem no reference is kept.
pub(super) fn accept(
    raw: &[u8],
    offset: u64,
    kind: MetricKind,
    keys: &mut KeyTable,
    interner: &mut Interner,
) -> Result<KeyId, ParseError> {
    let id = keys
        .acquire(raw, interner)
        .map_err(|kind| ParseError::new(offset, kind))?;
    let info = keys.get(id);
    let problem = info.problem().or_else(|| {
        (kind == MetricKind::Histogram)
            .then(|| info.histogram_problem())
            .flatten()
    });
    if let Some(kind) = problem {
        keys.release([id]);
        return Err(ParseError::new(offset, kind));
    }
    Ok(id)
}
