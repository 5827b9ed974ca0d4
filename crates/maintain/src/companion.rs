//! Companion files: what a worker keeps beside one of its `*.db` files, in
//! a subdirectory of its own, named after that file (exemplars in
//! `exemplars/<kind>_<id>.exemplars`, native histograms in
//! `native-histograms/histogram_<id>.native`). Python's collector never
//! looks into those subdirectories; whatever removes a `*.db` file removes
//! its companions, and a companion whose `*.db` file is gone is an orphan.

use std::path::{Path, PathBuf};

use multiprom_format::exemplar_file::{db_name_of_exemplar_file, exemplar_path, EXEMPLAR_DIR};
use multiprom_format::native_file::{
    db_name_of_native_histogram_file, native_histogram_path, NATIVE_HISTOGRAM_DIR,
};
use multiprom_format::FileName;

/// A kind of companion file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Companion {
    /// `exemplars/<kind>_<id>.exemplars`.
    Exemplars,
    /// `native-histograms/histogram_<id>.native`.
    NativeHistograms,
}

impl Companion {
    /// Every kind, for what applies to each alike.
    pub(crate) const ALL: [Companion; 2] = [Companion::Exemplars, Companion::NativeHistograms];

    /// The subdirectory of the metrics directory the companions live in.
    pub(crate) fn subdir(self) -> &'static str {
        match self {
            Companion::Exemplars => EXEMPLAR_DIR,
            Companion::NativeHistograms => NATIVE_HISTOGRAM_DIR,
        }
    }

    /// The companion of `dir/name`.
    pub(crate) fn path(self, dir: &Path, name: &FileName) -> PathBuf {
        match self {
            Companion::Exemplars => exemplar_path(dir, name),
            Companion::NativeHistograms => native_histogram_path(dir, name),
        }
    }

    /// The `*.db` file name whose companion is called `file_name`, if it is
    /// one of this kind.
    pub(crate) fn db_name_of(self, file_name: &str) -> Option<FileName> {
        match self {
            Companion::Exemplars => db_name_of_exemplar_file(file_name),
            Companion::NativeHistograms => db_name_of_native_histogram_file(file_name),
        }
    }
}
