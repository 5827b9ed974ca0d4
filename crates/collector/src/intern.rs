//! Interning: equal names and label tuples share one `Arc`, so the merge can
//! compare and hash them by pointer instead of by content on every scrape.

use foldhash::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Label pairs in Python's tuple form: the key's labels sorted by name, then
/// any appended `pid` or `le`. Names may repeat (a user `pid` label plus the
/// file's), as in Python's tuples.
pub(crate) type LabelTuple = Arc<Pairs>;

/// Label pairs without the `Arc`, for keys by address.
pub(crate) type Pairs = [(Arc<str>, Arc<str>)];

/// Hashes and compares an `Arc` by address.
#[derive(Debug, Clone)]
pub(crate) struct ByPtr<T: ?Sized>(pub Arc<T>);

impl<T: ?Sized> PartialEq for ByPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl<T: ?Sized> Eq for ByPtr<T> {}
impl<T: ?Sized> Hash for ByPtr<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as *const () as usize).hash(state);
    }
}

/// The address of an interned value, for per-scrape maps.
pub(crate) fn addr<T: ?Sized>(arc: &Arc<T>) -> usize {
    Arc::as_ptr(arc) as *const () as usize
}

#[derive(Debug, Default)]
pub(crate) struct Interner {
    strings: HashSet<Arc<str>>,
    tuples: HashSet<LabelTuple>,
    size_after_sweep: usize,
    /// A sweep ran, and what the next plan interns again is not growth:
    /// [`Interner::settle`] takes the size after it as the new baseline.
    settling: bool,
}

impl Interner {
    pub(crate) fn string(&mut self, s: &str) -> Arc<str> {
        if let Some(found) = self.strings.get(s) {
            return Arc::clone(found);
        }
        let arc: Arc<str> = Arc::from(s);
        self.strings.insert(Arc::clone(&arc));
        arc
    }

    pub(crate) fn tuple(&mut self, pairs: Vec<(Arc<str>, Arc<str>)>) -> LabelTuple {
        let arc: LabelTuple = Arc::from(pairs);
        if let Some(found) = self.tuples.get(&arc) {
            return Arc::clone(found);
        }
        self.tuples.insert(Arc::clone(&arc));
        arc
    }

    pub(crate) fn len(&self) -> usize {
        self.strings.len() + self.tuples.len()
    }

    /// Whether enough has been interned since the last sweep to make one worthwhile.
    pub(crate) fn wants_sweep(&self) -> bool {
        self.len() > 2 * self.size_after_sweep + 4096
    }

    /// Takes the size now as the baseline for [`Interner::wants_sweep`]:
    /// for growth that left nothing behind to sweep (new files, no file or
    /// key forgotten).
    pub(crate) fn rebaseline(&mut self) {
        self.size_after_sweep = self.len();
    }

    /// Forgets values nobody else holds (files that are gone). Callers clear
    /// every other cache keyed by these values first, so that a count of one
    /// really means unused.
    pub(crate) fn sweep(&mut self) {
        self.tuples.retain(|t| Arc::strong_count(t) > 1);
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.size_after_sweep = self.len();
        self.settling = true;
    }

    /// Called once a plan has been built: right after a sweep, the plan's
    /// own values (label tuples with `pid`, `le` and so on, which only the
    /// plan and its caches hold, and which the sweep had to let go) are
    /// interned again. Counting them as growth would call for another sweep
    /// on every scrape; the size now is the baseline instead.
    pub(crate) fn settle(&mut self) {
        if self.settling {
            self.size_after_sweep = self.len();
            self.settling = false;
        }
    }
}
