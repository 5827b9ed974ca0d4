//! Whether the directory could be listed at the last collection, so a
//! directory that goes away (deleted, unmounted) is logged once when it goes
//! and once when it is back, not on every scrape.

use std::sync::atomic::{AtomicBool, Ordering};

use multiprom_collector::CollectError;

/// The directory's state as the collections saw it.
#[derive(Debug, Default)]
pub(crate) struct Listability {
    unlistable: AtomicBool,
}

impl Listability {
    /// A collection listed the directory.
    pub(crate) fn listed(&self, dir: &std::path::Path) {
        if self.unlistable.swap(false, Ordering::Relaxed) {
            tracing::info!("{}: can be listed again, serving its files", dir.display());
        }
    }

    /// A collection could not list the directory.
    pub(crate) fn failed(&self, err: &CollectError) {
        if !self.unlistable.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "{err}; serving only multiprom's own metrics (multiprom_directory_listable 0) until it can be listed again"
            );
        }
    }
}
