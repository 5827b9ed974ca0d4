//! What this process has mapped: the tests that check when a collector maps
//! files read `/proc/self/maps`.

use std::path::Path;

/// How many of this process's memory maps are of files in `dir`.
pub(crate) fn maps_of(dir: &Path) -> usize {
    let dir = dir.canonicalize().expect("the directory exists");
    std::fs::read_to_string("/proc/self/maps")
        .expect("/proc/self/maps is readable")
        .lines()
        .filter(|line| line.contains(&*dir.to_string_lossy()))
        .count()
}
