//! [`ServedView`]: what a directory serves, read by every way out (the HTTP
//! endpoint, each pusher) as siblings.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::start_times::StartTimeBook;
use crate::{CollectError, DirCollector, Exemplars, NameFilter, Natives, Scrape, StartTimes};

/// One directory's served view: its collector and the start times of its
/// cumulative series. Shared (in an `Arc`) by the HTTP endpoint and the
/// pushers; each collects on its own thread when it needs to, and a
/// collection running when another reader arrives is shared (see
/// [`DirCollector::collect`]), so no reader waits on another's response.
///
/// ```
/// use multiprom_collector::{DirCollector, Exemplars, Natives, ServedView};
/// let dir = tempfile::tempdir()?;
/// let view = ServedView::new(DirCollector::new(dir.path()));
/// let served = view.collect_all(Natives::Merge, Exemplars::Attach)?;
/// assert!(served.scrape.families.is_empty()); // nothing written here
/// assert!(served.start_times.epoch() <= served.at);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ServedView {
    collector: Arc<DirCollector>,
    start_times: Mutex<StartTimeBook>,
}

/// One whole collection with the start time of each cumulative series.
#[derive(Debug, Clone)]
pub struct Served {
    /// The collection.
    pub scrape: Arc<Scrape>,
    /// When each cumulative series started counting.
    pub start_times: StartTimes,
    /// When it was taken.
    pub at: SystemTime,
}

impl From<DirCollector> for Arc<ServedView> {
    fn from(collector: DirCollector) -> Self {
        Arc::new(ServedView::new(collector))
    }
}

impl ServedView {
    /// The view of `collector`'s directory. Touches nothing on disk: the
    /// start times are read (or first kept) by the first
    /// [`ServedView::collect_all`].
    #[must_use]
    pub fn new(collector: impl Into<Arc<DirCollector>>) -> Self {
        ServedView {
            collector: collector.into(),
            start_times: Mutex::default(),
        }
    }

    /// The collector (shared with a maintainer's passes).
    #[must_use]
    pub fn collector(&self) -> &Arc<DirCollector> {
        &self.collector
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.collector.dir()
    }

    /// One collection, as [`DirCollector::collect_for`] with nothing left
    /// out (blocking: run it off an async runtime's workers).
    pub fn collect(
        &self,
        filter: Option<&NameFilter>,
        natives: Natives,
        exemplars: Exemplars,
    ) -> Result<Arc<Scrape>, CollectError> {
        self.collector
            .collect_for(|_| Arc::default(), filter, natives, exemplars)
    }

    /// One whole collection with its start times (blocking). Each whole
    /// collection a reader takes this way is also where series that went
    /// down or away are noticed, so the view's readers see one history.
    pub fn collect_all(
        &self,
        natives: Natives,
        exemplars: Exemplars,
    ) -> Result<Served, CollectError> {
        let scrape = self.collect(None, natives, exemplars)?;
        let at = SystemTime::now();
        let start_times = self.start_times_of(&scrape, at);
        Ok(Served {
            scrape,
            start_times,
            at,
        })
    }

    /// The start times for `scrape`, a collection of this view's collector
    /// (for the protobuf exposition's `created_timestamp`): a `whole` one
    /// (no filter) is where series that went down or away are noticed; a
    /// filtered one gets the times the last whole one left.
    pub fn start_times(&self, scrape: &Scrape, whole: bool) -> StartTimes {
        let now = SystemTime::now();
        if whole {
            return self.start_times_of(scrape, now);
        }
        self.lock_book().current(self.collector.dir(), now)
    }

    /// The start times after `scrape`, a whole collection taken at `at`.
    fn start_times_of(&self, scrape: &Scrape, at: SystemTime) -> StartTimes {
        self.lock_book().observe(self.collector.dir(), scrape, at)
    }

    fn lock_book(&self) -> std::sync::MutexGuard<'_, StartTimeBook> {
        self.start_times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
