//! What a fold does with exemplars: per series (entry key), the latest
//! exemplar of the folded files and of the compacted file goes into the
//! compacted file's exemplar file; the folded files' exemplar files go with
//! them.
//!
//! Exemplars are samples of what happened, not totals, so they take no part
//! in the journal: they are written into `exemplars/<kind>_compacted.exemplars`
//! in place, before the fold commits. A fold undone by recovery leaves them
//! there beside the worker's own (a duplicate, harmless: a reader keeps
//! the latest of a series); a fold that committed removes the workers'
//! exemplar files after their `*.db` files, and recovery finishes that
//! removal. A failure to read or write exemplars never stops a fold: the
//! exemplars concerned are lost, never the values.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use multiprom_format::exemplar_file::exemplar_path;
use multiprom_format::{read_exemplar_file, Exemplar, ExemplarWriter, FileName, ReadErrorKind};

/// Writes the latest exemplar per key among `folded`'s exemplar files into
/// `target`'s, where it is later than the one there. Returns the exemplars
/// written, or why not all could be (the fold goes on either way).
pub(crate) fn fold_exemplars(
    dir: &Path,
    target: &FileName,
    folded: &[FileName],
) -> Result<usize, String> {
    let mut latest: HashMap<String, Exemplar> = HashMap::new();
    let mut order = Vec::new();
    let mut problems = Vec::new();
    for name in folded {
        let path = exemplar_path(dir, name);
        let file = match read_exemplar_file(&path) {
            Ok(file) => file,
            Err(e) if matches!(e.kind, ReadErrorKind::Vanished) => continue,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        for entry in file.entries {
            match latest.get_mut(&entry.raw_key) {
                Some(kept) if kept.timestamp >= entry.exemplar.timestamp => {}
                Some(kept) => *kept = entry.exemplar,
                None => {
                    order.push(entry.raw_key.clone());
                    latest.insert(entry.raw_key, entry.exemplar);
                }
            }
        }
    }
    let mut written = 0;
    if !latest.is_empty() {
        // Only now: a directory without exemplars gets no exemplar file.
        match ExemplarWriter::open(dir, target) {
            Ok(writer) => {
                for key in order {
                    let Some(exemplar) = latest.remove(&key) else {
                        continue;
                    };
                    let slot = match writer.slot(&key) {
                        Ok(slot) => slot,
                        Err(e) => {
                            problems.push(e.to_string());
                            break;
                        }
                    };
                    if slot
                        .load()
                        .is_some_and(|kept| kept.timestamp >= exemplar.timestamp)
                    {
                        continue;
                    }
                    let labels = exemplar
                        .labels
                        .iter()
                        .map(|(n, v)| (n.as_str(), v.as_str()));
                    // Only this compactor writes the compacted exemplar file.
                    if slot
                        .store(labels, exemplar.value, exemplar.timestamp)
                        .is_ok()
                    {
                        written += 1;
                    }
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    if problems.is_empty() {
        Ok(written)
    } else {
        Err(problems.join("; "))
    }
}

/// Removes the exemplar file of a folded `name`, unless a new `name` is in
/// the directory: a new process with the same pid then owns it.
pub(crate) fn remove_folded_exemplars(dir: &Path, name: &FileName) -> io::Result<()> {
    if std::fs::symlink_metadata(dir.join(name.to_string())).is_ok() {
        return Ok(());
    }
    match std::fs::remove_file(exemplar_path(dir, name)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
