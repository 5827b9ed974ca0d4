//! What the accept loop knows of each open connection, to choose which one
//! to close when a new one arrives at the connection cap.
//!
//! Each connection shares a [`ConnectionState`] with the loop: its phase
//! (just accepted, silent since, idle between requests, reading a
//! request's headers, serving one, or ended by the client), and since when.
//! The phase is told by what the connection does:
//! [`TrackedIo`](crate::tracked_io::TrackedIo) sees it read from and
//! hyper's write buffer empty,
//! [`TrackedService`](crate::tracked_service::TrackedService) sees a request
//! start and its response end.
//!
//! Closing order ([`Connections::close`]):
//! 1. connections whose client has ended its side with no request under way
//!    (connect-and-close: hyper, told to allow half-closed connections,
//!    would keep them until the header timeout);
//! 2. those that have waited longest for a request: idle kept-alive
//!    connections, connections trickling their headers or silent since
//!    they were accepted, for over [`FRESH`] (none has anything to lose but
//!    a request it has not finished asking);
//! 3. those whose client has left a response unread longest (for at least
//!    [`STALLED_AFTER`]);
//! 4. connections accepted, or that began a request, less than [`FRESH`]
//!    ago (likely a request on its way), and only when no connection is
//!    still to be read from.
//!
//! Never closed to make room: a connection not read from yet (its request
//! may be there), a request being handled, a response its client is
//! reading.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// How long a client must have left its response unread before its
/// connection may be closed to make room. Long next to the pauses of a
/// client reading a large response as fast as it can.
const STALLED_AFTER: Duration = Duration::from_secs(1);

/// How long a connection that has sent nothing since it was accepted, or
/// has begun a request and not finished its headers, counts as fresh:
/// closed to make room only when nothing else can be and no connection just
/// accepted is still to be read from (which will likely be closable, a
/// connect-and-close for one). A client's request follows its connection
/// within a round trip and comes whole; under a burst of arrivals, reading
/// and parsing it can take the server tens of milliseconds, and a
/// connection whose headers are read but not yet parsed looks like one
/// trickling them.
const FRESH: Duration = Duration::from_secs(1);

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
    /// Read from, but nothing has come yet: a client that will never ask,
    /// or one whose request is on its way.
    Silent = 1,
    /// Open, with no byte of a next request yet, after a response (a
    /// kept-alive connection).
    Idle = 2,
    /// Some of a request's headers arrived, not all.
    ReadingHeaders = 3,
    /// A request is being answered: handled, or its response written.
    Serving = 4,
    /// The client ended the connection with no request under way: it is
    /// about to close by itself.
    Ended = 5,
}

impl Phase {
    fn from_u8(value: u8) -> Phase {
        match value {
            0 => Phase::New,
            1 => Phase::Silent,
            2 => Phase::Idle,
            3 => Phase::ReadingHeaders,
            4 => Phase::Serving,
            _ => Phase::Ended,
        }
    }
}

/// What a read from a connection's socket brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    /// Some bytes.
    Bytes,
    /// Nothing yet.
    Nothing,
    /// The end of the client's sending side, or an error: nothing more
    /// will come.
    End,
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
        micros(self.epoch.elapsed()).min(NOT_BLOCKED - 1)
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

    /// The connection was read from: on a connection waiting for a
    /// request, bytes begin one, nothing leaves it waiting (since it was
    /// accepted or last answered), and an end means the client is gone.
    /// Once a request is under way, reads are its body or a client that
    /// closed its sending side after asking, and change nothing.
    pub(crate) fn read(&self, read: ReadOutcome) {
        let phase = self.phase();
        if !matches!(phase, Phase::New | Phase::Silent | Phase::Idle) {
            return;
        }
        match read {
            ReadOutcome::Bytes => self.enter(Phase::ReadingHeaders),
            ReadOutcome::Nothing if phase == Phase::New => {
                self.phase.store(Phase::Silent as u8, Ordering::Relaxed);
            }
            ReadOutcome::Nothing => return,
            ReadOutcome::End => self.enter(Phase::Ended),
        }
        self.now_closable();
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
    fn closing_order(&self, now: u64) -> Option<(Tier, u64)> {
        let since = self.since.load(Ordering::Relaxed);
        match self.phase() {
            Phase::New => None,
            Phase::Ended => Some((Tier::Ended, since)),
            Phase::Silent | Phase::ReadingHeaders if now.saturating_sub(since) < micros(FRESH) => {
                Some((Tier::Fresh, since))
            }
            Phase::Silent | Phase::Idle | Phase::ReadingHeaders => Some((Tier::Waiting, since)),
            Phase::Serving => {
                let blocked = self.write_blocked_since.load(Ordering::Relaxed);
                (blocked != NOT_BLOCKED && now.saturating_sub(blocked) >= micros(STALLED_AFTER))
                    .then_some((Tier::Unread, blocked))
            }
        }
    }

    fn is_new(&self) -> bool {
        self.phase() == Phase::New
    }
}

/// Who goes first when room is made, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    /// The client has ended the connection.
    Ended,
    /// Waiting for a request (idle, silent for long, trickling headers).
    Waiting,
    /// A response left unread.
    Unread,
    /// Only just accepted and silent, or only just begun to send a
    /// request: likely a request on its way, or being read.
    Fresh,
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
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
    /// many it closed (none if none can be). Only connections that have
    /// ended or wait for a request go several at a time: a response left
    /// unread, or a request likely on its way, goes only one at a time.
    pub(crate) fn close(&mut self, at_most: usize) -> usize {
        self.prune();
        let now = micros(self.epoch.elapsed());
        let mut candidates: Vec<((Tier, u64), usize)> = self
            .open
            .iter()
            .enumerate()
            .filter_map(|(i, (state, _))| state.closing_order(now).map(|order| (order, i)))
            .collect();
        let Some(&((best, _), _)) = candidates.iter().min() else {
            return 0;
        };
        if best == Tier::Fresh && self.open.iter().any(|(state, _)| state.is_new()) {
            // Better to wait for the new ones to be read from than to close
            // a connection whose request may be on its way.
            return 0;
        }
        if best > Tier::Waiting {
            candidates.retain(|&((tier, _), _)| tier == best);
        } else {
            candidates.retain(|&((tier, _), _)| tier <= Tier::Waiting);
        }
        let count = match best {
            Tier::Ended | Tier::Waiting => at_most.min(candidates.len()),
            Tier::Unread | Tier::Fresh => 1,
        };
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
        state.read(ReadOutcome::Nothing);
        assert_eq!(state.phase(), Phase::Silent);
        state.read(ReadOutcome::Bytes);
        assert_eq!(state.phase(), Phase::ReadingHeaders);
        state.request_started();
        // Reading the body, or noticing the client's end, is not a new
        // request.
        state.read(ReadOutcome::Bytes);
        state.read(ReadOutcome::End);
        assert_eq!(state.phase(), Phase::Serving);
        // The body is not done with: a flush is not the end of the response.
        state.flushed();
        assert_eq!(state.phase(), Phase::Serving);
        state.response_ended();
        state.flushed();
        assert_eq!(state.phase(), Phase::Idle);
        assert_eq!(state.requests(), 1);
        state.read(ReadOutcome::End);
        assert_eq!(state.phase(), Phase::Ended);
        // A new connection's first read may bring a whole request.
        let state = Connections::new().state();
        state.read(ReadOutcome::Bytes);
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

    /// Adds a connection in the state `setup` leaves it, returning its task.
    fn add(connections: &mut Connections, setup: impl FnOnce(&ConnectionState)) -> AbortHandle {
        let state = connections.state();
        setup(&state);
        let task = pending_task();
        connections.add(state, task.clone());
        task
    }

    /// A connection that was answered once and waits for its next request.
    fn kept_alive(state: &ConnectionState) {
        state.read(ReadOutcome::Bytes);
        state.request_started();
        state.response_ended();
        state.flushed();
    }

    /// Closes one connection and lets the runtime drop it.
    async fn close_one(connections: &mut Connections) -> usize {
        let closed = connections.close(1);
        tokio::task::yield_now().await;
        closed
    }

    #[tokio::test(start_paused = true)]
    async fn the_longest_waiting_goes_first_and_a_served_or_new_one_never() {
        let mut connections = Connections::new();
        let serving = add(&mut connections, |s| {
            s.read(ReadOutcome::Bytes);
            s.request_started();
        });
        let not_read = add(&mut connections, |_| {});
        tokio::time::advance(Duration::from_secs(1)).await;
        let trickling = add(&mut connections, |s| s.read(ReadOutcome::Bytes));
        tokio::time::advance(Duration::from_secs(1)).await;
        let idle = add(&mut connections, kept_alive);

        assert_eq!(close_one(&mut connections).await, 1);
        assert!(trickling.is_finished() && !idle.is_finished());
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(idle.is_finished());
        assert_eq!(
            close_one(&mut connections).await,
            0,
            "a connection being served or not read yet closed"
        );
        assert!(!serving.is_finished() && !not_read.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_its_client_ended_goes_before_older_idle_ones() {
        let mut connections = Connections::new();
        let idle = add(&mut connections, kept_alive);
        tokio::time::advance(Duration::from_secs(1)).await;
        let ended = add(&mut connections, |s| s.read(ReadOutcome::End));
        // A client that closes its sending side after asking still waits
        // for the answer.
        let asked = add(&mut connections, |s| {
            s.read(ReadOutcome::Bytes);
            s.request_started();
            s.read(ReadOutcome::End);
        });

        assert_eq!(close_one(&mut connections).await, 1);
        assert!(ended.is_finished() && !idle.is_finished());
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(idle.is_finished());
        assert_eq!(close_one(&mut connections).await, 0);
        assert!(!asked.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_silent_connection_goes_last_and_not_while_new_ones_wait() {
        let mut connections = Connections::new();
        let unread = add(&mut connections, |s| {
            s.request_started();
            s.write_blocked();
        });
        tokio::time::advance(STALLED_AFTER).await;
        let fresh = add(&mut connections, |s| s.read(ReadOutcome::Nothing));
        let new = add(&mut connections, |_| {});
        // A response left unread goes before a connection whose request
        // may be on its way.
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(unread.is_finished() && !fresh.is_finished());
        // The new one is not read from yet: wait for it rather than close
        // the fresh one.
        assert_eq!(close_one(&mut connections).await, 0);
        new.abort();
        tokio::task::yield_now().await;
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(fresh.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_just_begun_goes_after_a_response_left_unread() {
        let mut connections = Connections::new();
        let unread = add(&mut connections, |s| {
            s.request_started();
            s.write_blocked();
        });
        tokio::time::advance(STALLED_AFTER).await;
        let asking = add(&mut connections, |s| s.read(ReadOutcome::Bytes));
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(unread.is_finished() && !asking.is_finished());
        // A request that has not completed its headers for a while is
        // trickling them.
        let unread = add(&mut connections, |s| {
            s.request_started();
            s.write_blocked();
        });
        tokio::time::advance(FRESH).await;
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(asking.is_finished() && !unread.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_is_fresh_only_for_a_while() {
        let mut connections = Connections::new();
        let silent = add(&mut connections, |s| s.read(ReadOutcome::Nothing));
        tokio::time::advance(FRESH).await;
        let unread = add(&mut connections, |s| {
            s.request_started();
            s.write_blocked();
        });
        tokio::time::advance(STALLED_AFTER).await;
        let _new = add(&mut connections, |_| {});
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(silent.is_finished() && !unread.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn several_at_once_go_oldest_first() {
        let mut connections = Connections::new();
        let mut tasks = Vec::new();
        for _ in 0..5 {
            tasks.push(add(&mut connections, kept_alive));
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert_eq!(connections.close(3), 3);
        tokio::task::yield_now().await;
        let finished: Vec<bool> = tasks.iter().map(AbortHandle::is_finished).collect();
        assert_eq!(finished, [true, true, true, false, false]);
        assert_eq!(connections.close(3), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn only_connections_waiting_for_a_request_go_several_at_once() {
        let mut connections = Connections::new();
        let idle = add(&mut connections, kept_alive);
        let unread: Vec<AbortHandle> = (0..3)
            .map(|_| {
                add(&mut connections, |s| {
                    s.request_started();
                    s.write_blocked();
                })
            })
            .collect();
        tokio::time::advance(STALLED_AFTER).await;
        let fresh: Vec<AbortHandle> = (0..3)
            .map(|_| add(&mut connections, |s| s.read(ReadOutcome::Bytes)))
            .collect();
        assert_eq!(connections.close(16), 1);
        tokio::task::yield_now().await;
        assert!(idle.is_finished());
        for round in 1..=3 {
            assert_eq!(connections.close(16), 1);
            tokio::task::yield_now().await;
            let gone = unread.iter().filter(|t| t.is_finished()).count();
            assert_eq!(gone, round);
        }
        assert_eq!(connections.close(16), 1);
        tokio::task::yield_now().await;
        assert_eq!(fresh.iter().filter(|t| t.is_finished()).count(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_left_its_response_unread_goes_when_nothing_else_can() {
        let mut connections = Connections::new();
        let unread_state = connections.state();
        unread_state.request_started();
        let unread = pending_task();
        connections.add(Arc::clone(&unread_state), unread.clone());
        let answering = add(&mut connections, |s| s.request_started());

        unread_state.write_blocked();
        tokio::time::advance(STALLED_AFTER / 2).await;
        assert_eq!(
            close_one(&mut connections).await,
            0,
            "closed a briefly blocked writer"
        );
        tokio::time::advance(STALLED_AFTER).await;
        // A client that reads again is not stalled.
        unread_state.write_unblocked();
        assert_eq!(close_one(&mut connections).await, 0);
        unread_state.write_blocked();
        tokio::time::advance(STALLED_AFTER).await;
        assert_eq!(close_one(&mut connections).await, 1);
        assert!(unread.is_finished() && !answering.is_finished());
    }
}
