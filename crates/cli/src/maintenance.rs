//! Running the directory's maintainer beside the endpoint: recovery, a
//! warm collection and a first pass before serving, then each pass when the maintainer says it is
//! due, on the blocking pool (its passes move files, sleep and walk
//! `/proc`), one at a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use multiprom_collector::DirCollector;
use multiprom_maintain::Maintainer;
use tokio::task::JoinHandle;

/// How long to wait before trying again after a pass panicked (a bug).
const AFTER_A_PANIC: Duration = Duration::from_secs(1);

/// Recovers the directory, warms the endpoint up (`warm_up`: its first
/// collections) and makes the first pass (so a directory left by an
/// earlier run is reaped and folded before the first scrape), then runs
/// the maintainer on its schedule until the returned task is aborted.
/// Compaction passes keep `collector`'s collections out while they fold.
pub(crate) async fn start(
    maintainer: Arc<Maintainer>,
    collector: Arc<DirCollector>,
    warm_up: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    let first = {
        let (maintainer, collector) = (Arc::clone(&maintainer), Arc::clone(&collector));
        tokio::task::spawn_blocking(move || {
            maintainer.recover(&collector);
            // The first look at the processes after the collector has seen
            // every file, so the first scrape already answers by it.
            warm_up();
            maintainer.run_due(&collector)
        })
        .await
        .map_err(std::io::Error::other)?
    };
    if let Some(compact) = maintainer
        .config()
        .compact
        .filter(|_| maintainer.compacts())
    {
        tracing::info!(
            "compacting exited workers' files in {} every {:?}",
            maintainer.dir().display(),
            compact.interval
        );
    }
    Ok(tokio::spawn(run(maintainer, collector, first)))
}

async fn run(maintainer: Arc<Maintainer>, collector: Arc<DirCollector>, mut next: Instant) {
    loop {
        tokio::time::sleep_until(next.into()).await;
        let (maintainer, collector) = (Arc::clone(&maintainer), Arc::clone(&collector));
        // Outcomes are logged and counted by the maintainer.
        next = match tokio::task::spawn_blocking(move || maintainer.run_due(&collector)).await {
            Ok(next) => next,
            Err(e) => {
                tracing::error!("a maintenance pass failed: {e}");
                Instant::now() + AFTER_A_PANIC
            }
        };
    }
}
