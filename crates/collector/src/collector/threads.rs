//! Work shared between threads for one collection: a queue of items that
//! this thread and helpers take from, so that a helper that cannot be
//! started leaves its share to the others and a scrape never fails for
//! want of a thread.

/// Runs `work` on each of `items` on up to `threads` threads, this one
/// among them, each taking the next item until none is left (so a thread
/// that cannot be started leaves its share to the others, and a scrape
/// never fails for want of one), and returns the results in the order of
/// `items`, however the threads ran.
pub(super) fn on_threads<I: Send, R: Send>(
    items: impl Iterator<Item = I> + Send,
    threads: usize,
    work: impl Fn(I) -> R + Sync,
) -> Vec<R> {
    on_threads_beside(items, threads, work, || ()).1
}

/// [`on_threads`], this thread running `beside` before it takes items.
pub(super) fn on_threads_beside<I: Send, R: Send, T>(
    items: impl Iterator<Item = I> + Send,
    threads: usize,
    work: impl Fn(I) -> R + Sync,
    beside: impl FnOnce() -> T,
) -> (T, Vec<R>) {
    let queue = std::sync::Mutex::new(items.enumerate());
    let run = || {
        let mut done = Vec::new();
        loop {
            let next = queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .next();
            let Some((n, item)) = next else {
                return done;
            };
            done.push((n, work(item)));
        }
    };
    let (beside, mut done) = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, run).ok())
            .collect();
        let beside = beside();
        let mut done = run();
        for helper in helpers {
            // A panic in a helper is a bug; pass it on.
            done.extend(
                helper
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
            );
        }
        (beside, done)
    });
    done.sort_unstable_by_key(|&(n, _)| n);
    (beside, done.into_iter().map(|(_, result)| result).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_item_order_whatever_the_threads() {
        for threads in [1, 2, 5] {
            let squares = on_threads(0..40u64, threads, |n| {
                // Uneven work, so threads finish out of turn.
                std::thread::sleep(std::time::Duration::from_micros(n % 7 * 50));
                n * n
            });
            assert_eq!(squares, (0..40u64).map(|n| n * n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn beside_runs_once_on_this_thread_and_items_still_all_run() {
        let here = std::thread::current().id();
        let (beside, done) =
            on_threads_beside(0..10, 3, |n| n + 1, || std::thread::current().id() == here);
        assert!(beside);
        assert_eq!(done, (1..11).collect::<Vec<_>>());
    }
}
