//! The file table: a listing's paths looked up by path, new files added and those no longer listed forgotten.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::tracked::TrackedFile;

use super::file_entry::{file_name, path_bytes, FileEntry, PathKey};
use super::state::CollectorState;

/// The index in `state.known` of each of `paths`, adding new files and
/// forgetting those no longer listed.
pub(super) fn index_paths(state: &mut CollectorState, paths: &[PathBuf]) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::with_capacity(paths.len());
    // Sized once for a first listing of thousands of files, rather than
    // grown by doubling.
    state
        .by_path
        .reserve(paths.len().saturating_sub(state.by_path.len()));
    state
        .known
        .reserve(paths.len().saturating_sub(state.known.len()));
    for path in paths {
        let index = match state.by_path.get(path_bytes(path)) {
            Some(&index) => index,
            None => {
                let shared: Arc<Path> = Arc::from(path.as_path());
                let known = FileEntry {
                    path: Arc::clone(&shared),
                    file: file_name(path).map(TrackedFile::new),
                    problem: None,
                    last_problem: None,
                };
                let index = match state.free.pop() {
                    Some(index) => {
                        state.known[index] = Some(known);
                        index
                    }
                    None => {
                        state.known.push(Some(known));
                        state.known.len() - 1
                    }
                };
                state.by_path.insert(PathKey(shared), index);
                state.replan = true;
                index
            }
        };
        order.push(index);
    }
    // Forget files no longer listed.
    let mut listed = vec![false; state.known.len()];
    for &index in &order {
        listed[index] = true;
    }
    for (index, listed) in listed.into_iter().enumerate() {
        if listed {
            continue;
        }
        if let Some(mut known) = state.known[index].take() {
            if let Some(file) = &mut known.file {
                if file.is_mapped() {
                    state.maps -= 1;
                }
                file.reset(&mut state.keys);
            }
            state.by_path.remove(path_bytes(&known.path));
            state.free.push(index);
            state.replan = true;
            state.files_forgotten += 1;
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(|n| Path::new("/d").join(n)).collect()
    }

    // New paths are added in listing order; a path no longer listed is
    // forgotten and its slot reused by the next new path; a listing of the
    // same paths changes nothing.
    #[test]
    fn the_file_table_adds_forgets_and_reuses_slots() {
        let mut state = CollectorState::default();
        let first = paths(&["counter_1.db", "counter_2.db", "notes.db"]);
        assert_eq!(index_paths(&mut state, &first), [0, 1, 2]);
        assert!(state.replan);
        assert!(state.known[2].as_ref().is_some_and(|k| k.file.is_none()));

        state.replan = false;
        assert_eq!(index_paths(&mut state, &first), [0, 1, 2]);
        assert!(!state.replan);

        let second = paths(&["counter_1.db", "notes.db"]);
        assert_eq!(index_paths(&mut state, &second), [0, 2]);
        assert!(state.replan && state.known[1].is_none());
        assert_eq!(state.files_forgotten, 1);
        assert!(!state.by_path.contains_key(path_bytes(&first[1])));

        let third = paths(&["gauge_all_3.db", "counter_1.db", "notes.db"]);
        assert_eq!(index_paths(&mut state, &third), [1, 0, 2]);
        assert_eq!(state.by_path.get(path_bytes(&third[0])), Some(&1));
    }
}
