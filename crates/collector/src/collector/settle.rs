//! Settling the files of exited writers once their values are read whole.

use crate::tracked::Settled;

use super::file_table::FileEntry;

/// Marks the files of `indexes` (planned files) whose writer is gone, and
/// whose values the collection just read whole into the value buffer, as
/// settled: how many became so.
pub(super) fn settle_gathered(
    known: &mut [Option<FileEntry>],
    indexes: impl Iterator<Item = usize>,
    generation: u64,
    collection: u64,
) -> usize {
    let mut newly = 0;
    for index in indexes {
        if let Some(Some(FileEntry {
            file: Some(file),
            problem: None,
            ..
        })) = known.get_mut(index)
        {
            if matches!(file.settled, Settled::WriterGone | Settled::Yes { .. })
                && !file.is_settled(generation)
            {
                file.settled = Settled::Yes {
                    plan: generation,
                    since: collection,
                };
                newly += 1;
            }
        }
    }
    newly
}
