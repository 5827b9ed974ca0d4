//! What the accept loop knows of each open connection, to choose which one
//! to close when a new one arrives at the connection cap.
//!
//! Each connection shares a [`ConnectionState`] with the loop: its phase
//! (just accepted, idle between requests, reading a request's headers, or
//! serving one), and since when. The phase is told by what the connection
//! does: [`TrackedIo`](crate::tracked_io::TrackedIo) sees it read from and
//! hyper's write buffer empty,
//! [`TrackedService`](crate::tracked_service::TrackedService) sees a request
//! start and its response end.
//!
//! Closing order ([`Connections::close`]): first the connections that have
//! waited longest for a request (idle keep-alive connections, connections
//! trickling their headers: neither has anything to lose but a request it
//! has not finished asking); when none is left, those whose clients have
//! left a response unread longest (for at least [`STALLED_AFTER`]). Never
//! closed to make room: a connection not read from yet (its request may be
//! there), a request being handled, a response its client is reading.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// How long a client must have left its response unread before its
/// connection may be closed to make room. Long next to the pauses of a
/// client reading a large response as fast as it can.
pub(crate) const STALLED_AFTER: Duration = Duration::from_secs(1);

/// The fewest connections [`Connections`] holds before pruning finished ones.
const MIN_PRUNE_AT: usize = 64;

/// Stands for "not blocked" in [`ConnectionState::write_blocked_since`].
const NOT_BLOCKED: u64 = u64::MAX;

/// Where a connection is in its request cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// Accepted, not read from yet: whether its request has arrived is not
    /// known. In a burst of arrivals, hundreds may be accepted before the
    /// first of them is read; closing one then could cut off a scrape whose
    /// request is already there.
    New = 0,
    /// Open, with no byte of a next request yet (a kept-alive connection,
    /// or a new one that has sent nothing).
    Idle = 1,
    /// Some of a request's headers arrived, not all.
    ReadingHeaders = 2,
    /// A request is being answered: handled, or its response written.
    Serving = 3,
}

impl Phase {
    fn from_u8(value: u8) -> Phase {
        match value {
            0 => Phase::New,
            1 => Phase::Idle,
            2 => Phase::ReadingHeaders,
            _ => Phase::Serving,
        }
    }
}

/// One connection's phase, shared between its task (which updates it) and
/// the accept loop (which reads it). Times are microseconds since the
/// server's start, so that they fit in atomics.
#[derive(Debug)]
pub(crate) struct ConnectionState {
    epoch: Instant,
    /// Told when this connection becomes one that may be closed.
    closable: Arc<Notify>,
    phase: AtomicU8,
    /// When the current phase began.
    since: AtomicU64,
    /// Requests whose response is not finished yet (several when pipelined).
    responses_open: AtomicU64,
    /// Requests started on this connection, to tell one response from the
    /// next.
    requests: AtomicU64,
    /// Since when the response's writing has waited for the client, or
    /// [`NOT_BLOCKED`].
    write_blocked_since: AtomicU64,
}

impl ConnectionState {
    /// A connection accepted now. `epoch` is the server's start;
    /// `closable` is told when the connection may be closed to make room.
    fn new(epoch: Instant, closable: Arc<Notify>) -> ConnectionState {
        let state = ConnectionState {
            epoch,
            closable,
            phase: AtomicU8::new(Phase::New as u8),
            since: AtomicU64::new(0),
            responses_open: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            write_blocked_since: AtomicU64::new(NOT_BLOCKED),
        };
        state.since.store(state.now(), Ordering::Relaxed);
        state
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(NOT_BLOCKED - 1)
    }

    fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Relaxed))
    }

    fn enter(&self, phase: Phase) {
        self.since.store(self.now(), Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Wakes a connection waiting at the cap for one to close, if any.
    fn now_closable(&self) {
        self.closable.notify_one();
    }

    /// The connection was read from, and `got_bytes`: on a new or idle
    /// connection, bytes begin a request; none leave it idle, waiting
    /// since it was accepted or last answered.
    pub(crate) fn read(&self, got_bytes: bool) {
        match self.phase() {
            Phase::Idle if got_bytes => self.enter(Phase::ReadingHeaders),
            Phase::New if got_bytes => {
                self.enter(Phase::ReadingHeaders);
                self.now_closable();
            }
            Phase::New => {
                self.phase.store(Phase::Idle as u8, Ordering::Relaxed);
                self.now_closable();
            }
            _ => {}
        }
    }

    /// A request's headers are complete and it is being handled.
    pub(crate) fn request_started(&self) {
        self.responses_open.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.phase.store(Phase::Serving as u8, Ordering::Relaxed);
    }

    /// A response's body is done with (written into hyper's buffer, or
    /// dropped); the bytes may still be on their way out.
    pub(crate) fn response_ended(&self) {
        self.responses_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Everything hyper had to write is written: with no response open,
    /// the connection waits for its next request.
    pub(crate) fn flushed(&self) {
        if self.phase() == Phase::Serving && self.responses_open.load(Ordering::Relaxed) == 0 {
            self.enter(Phase::Idle);
            self.now_closable();
        }
    }

    /// Requests started so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Writing waits for the client to read.
    pub(crate) fn write_blocked(&self) {
        self.write_blocked_since
            .store(self.now(), Ordering::Relaxed);
    }

    /// Writing moved on.
    pub(crate) fn write_unblocked(&self) {
        self.write_blocked_since
            .store(NOT_BLOCKED, Ordering::Relaxed);
    }

    /// How readily this connection may be closed to make room: lower goes
    /// first; `None` if it may not be.
    fn closing_order(&self, now: u64) -> Option<(u8, u64)> {
        match self.phase() {
            Phase::New => None,
            Phase::Idle | Phase::ReadingHeaders => Some((0, self.since.load(Ordering::Relaxed))),
            Phase::Serving => {
                let blocked = self.write_blocked_since.load(Ordering::Relaxed);
                let stalled_after = STALLED_AFTER.as_micros() as u64;
                (blocked != NOT_BLOCKED && now.saturating_sub(blocked) >= stalled_after)
                    .then_some((1, blocked))
            }
        }
    }
}

/// The open connections, as the accept loop sees them.
#[derive(Debug)]
pub(crate) struct Connections {
    epoch: Instant,
    closable: Arc<Notify>,
    /// Finished ones included, until the next pruning.
    open: Vec<(Arc<ConnectionState>, AbortHandle)>,
    /// How many `open` may hold before finished ones are pruned: twice what
    /// the last pruning left, so pruning costs O(1) a connection.
    prune_at: usize,
}

impl Connections {
    /// None open yet; times count from now.
    pub(crate) fn new() -> Connections {
        Connections {
            epoch: Instant::now(),
            closable: Arc::new(Notify::new()),
            open: Vec::new(),
            prune_at: MIN_PRUNE_AT,
        }
    }

    /// The state for a connection accepted now.
    pub(crate) fn state(&self) -> Arc<ConnectionState> {
        Arc::new(ConnectionState::new(self.epoch, Arc::clone(&self.closable)))
    }

    /// Told when a connection may have become closable (it may have been
    /// closed or closed itself since).
    pub(crate) fn closable(&self) -> Arc<Notify> {
        Arc::clone(&self.closable)
    }

    /// Keeps track of a connection, running as `task`.
    pub(crate) fn add(&mut self, state: Arc<ConnectionState>, task: AbortHandle) {
        if self.open.len() >= self.prune_at {
            self.prune();
        }
        self.open.push((state, task));
    }

    fn prune(&mut self) {
        self.open.retain(|(_, task)| !task.is_finished());
        self.prune_at = (self.open.len() * 2).max(MIN_PRUNE_AT);
    }

    /// Closes up to `at_most` of the connections that can best be spared
    /// (see the module documentation), in one pass over them; returns how
    /// many it closed (none if none can be).
    pub(crate) fn close(&mut self, at_most: usize) -> usize {
        self.prune();
        let now = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let mut candidates: Vec<((u8, u64), usize)> = self
            .open
            .iter()
            .enumerate()
            .filter_map(|(i, (state, _))| state.closing_order(now).map(|order| (order, i)))
            .collect();
        let count = at_most.min(candidates.len());
        if count == 0 {
            return 0;
        }
        if count < candidates.len() {
            candidates.select_nth_unstable(count - 1);
        }
        let mut chosen: Vec<usize> = candidates[..count].iter().map(|&(_, i)| i).collect();
        // From the highest index down, so that each removal leaves the
        // indices still to remove in place.
        chosen.sort_unstable_by(|a, b| b.cmp(a));
        for i in chosen {
            let (_, task) = self.open.swap_remove(i);
            // Dropping the connection's future closes its socket and frees
            // its place.
            task.abort();
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn phases_follow_the_request_cycle() {
        let state = Connections::new().state();
        assert_eq!(state.phase(), Phase::New);
        state.read(false);
        assert_eq!(state.phase(), Phase::Idle);
        state.read(true);
        assert_eq!(state.phase(), Phase::ReadingHeaders);
        state.request_started();
        // Reading the body, or noticing the client's end, is not a new
        // request.
        state.read(true);
        assert_eq!(state.phase(), Phase::Serving);
        // The body is not done with: a flush is not the end of the response.
        state.flushed();
        assert_eq!(state.phase(), Phase::Serving);
        state.response_ended();
        state.flushed();
        assert_eq!(state.phase(), Phase::Idle);
        assert_eq!(state.requests(), 1);
        // A new connection's first read may bring a whole request.
        let state = Connections::new().state();
        state.read(true);
        assert_eq!(state.phase(), Phase::ReadingHeaders);
    }

    #[tokio::test(start_paused = true)]
    async fn pipelined_requests_keep_the_connection_serving() {
        let state = Connections::new().state();
        state.request_started();
        state.request_started();
        state.response_ended();
        state.flushed();
        assert_eq!(state.phase(), Phase::Serving);
        state.response_ended();
        state.flushed();
        assert_eq!(state.phase(), Phase::Idle);
    }

    /// Tasks that never finish on their own, for their abort handles.
    fn pending_task() -> AbortHandle {
        tokio::spawn(std::future::pending::<()>()).abort_handle()
    }

    #[tokio::test(start_paused = true)]
    async fn the_longest_waiting_goes_first_and_a_served_or_unread_one_never() {
        let mut connections = Connections::new();
        let serving = connections.state();
        serving.read(true);
        serving.request_started();
        let serving_task = pending_task();
        connections.add(Arc::clone(&serving), serving_task.clone());
        let not_read = connections.state();
        let not_read_task = pending_task();
        connections.add(not_read, not_read_task.clone());
        tokio::time::advance(Duration::from_secs(1)).await;
        let trickling = connections.state();
        trickling.read(true);
        let trickling_task = pending_task();
        connections.add(Arc::clone(&trickling), trickling_task.clone());
        tokio::time::advance(Duration::from_secs(1)).await;
        let idle = connections.state();
        idle.read(false);
        let idle_task = pending_task();
        connections.add(idle, idle_task.clone());

        assert_eq!(connections.close(1), 1);
        tokio::task::yield_now().await;
        assert!(trickling_task.is_finished());
        assert!(!idle_task.is_finished());
        assert_eq!(connections.close(1), 1);
        tokio::task::yield_now().await;
        assert!(idle_task.is_finished());
        assert_eq!(
            connections.close(1),
            0,
            "a connection being served or not read yet closed"
        );
        assert!(!serving_task.is_finished() && !not_read_task.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn several_at_once_go_oldest_first() {
        let mut connections = Connections::new();
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let state = connections.state();
            state.read(false);
            let task = pending_task();
            connections.add(state, task.clone());
            tasks.push(task);
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert_eq!(connections.close(3), 3);
        tokio::task::yield_now().await;
        let finished: Vec<bool> = tasks.iter().map(AbortHandle::is_finished).collect();
        assert_eq!(finished, [true, true, true, false, false]);
        assert_eq!(connections.close(3), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_left_its_response_unread_goes_when_nothing_else_can() {
        let mut connections = Connections::new();
        let unread = connections.state();
        unread.request_started();
        let unread_task = pending_task();
        connections.add(Arc::clone(&unread), unread_task.clone());
        let answering = connections.state();
        answering.request_started();
        let answering_task = pending_task();
        connections.add(answering, answering_task.clone());

        unread.write_blocked();
        tokio::time::advance(STALLED_AFTER / 2).await;
        assert_eq!(connections.close(1), 0, "closed a briefly blocked writer");
        tokio::time::advance(STALLED_AFTER).await;
        // A client that reads again is not stalled.
        unread.write_unblocked();
        assert_eq!(connections.close(1), 0);
        unread.write_blocked();
        tokio::time::advance(STALLED_AFTER).await;
        assert_eq!(connections.close(1), 1);
        tokio::task::yield_now().await;
        assert!(unread_task.is_finished());
        assert!(!answering_task.is_finished());
    }
}
