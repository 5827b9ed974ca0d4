//! [`serve`]: an HTTP/1.1 accept loop with the timeouts `axum::serve` lacks.
//!
//! Each connection runs in its own task, so a slow or stalled client only
//! ever holds its own connection: request headers must arrive within
//! [`ServerConfig::header_read_timeout`] (slowloris), a response its client
//! leaves unread for [`ServerConfig::write_timeout`] is dropped with its
//! connection, and on shutdown in-flight requests get
//! [`ServerConfig::shutdown_grace`] to finish. A client that closes its
//! sending side after its request still gets the answer.
//!
//! Open connections are capped ([`ServerConfig::max_connections`]): each
//! holds a task and its buffers, so without a cap a client opening
//! connections without end would grow the process without end. The loop
//! never stops accepting: a connection arriving at the cap is let in by
//! closing one that can be spared (the `connections` module has the
//! order): one its client has ended, else the one that has waited longest
//! for a request (idle, or still sending its headers), else one whose
//! client has left its response unread for a while. A request being
//! handled, or a response its client is reading, is never cut off to make
//! room, and a connection only just accepted is spared while its request
//! may be on its way; when no connection can be closed, the newcomer waits
//! until one can (or closes), and later ones wait in the listen backlog. So
//! a flood of idle, slow or non-reading connections cannot keep a scrape
//! out. Reaching the cap is logged, at most once a minute.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::connections::Connections;
use crate::tracked_io::TrackedIo;
use crate::tracked_service::TrackedService;

/// Connection-level limits.
///
/// ```
/// use std::time::Duration;
/// use multiprom_http::ServerConfig;
///
/// let config = ServerConfig::default().with_max_connections(64);
/// assert_eq!(config.header_read_timeout, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// A connection whose request headers are not complete within this time
    /// (from the first byte, or from the end of the previous response on a
    /// kept-alive connection) is closed.
    pub header_read_timeout: Duration,
    /// A connection whose client leaves a response unread this long in all
    /// (the time its writes wait for the client to read, added up over the
    /// response) is closed.
    pub write_timeout: Duration,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_grace: Duration,
    /// Connections open at once (at least 1). A connection arriving at the
    /// cap is let in by closing one that can be spared (see [`serve`]); it
    /// is held, one over the cap, until that one is closed.
    pub max_connections: usize,
}

/// The default [`ServerConfig::max_connections`]: far more than Prometheus
/// servers and people at a status page open, few enough that a client
/// opening connections without end costs a bounded amount of memory.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How often reaching the connection cap may be logged.
const CAP_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// The listen backlog `serve` sets: connection attempts the kernel queues
/// until they are accepted. One beyond it is dropped, and its client tries
/// again only a second later; this many absorb a burst of hundreds of
/// connections (tokio's own `TcpListener::bind` uses the same; the kernel
/// caps it at `net.core.somaxconn`).
const LISTEN_BACKLOG: i32 = 1024;

/// How often a connection waiting at the cap looks again for one to close,
/// besides when told that one may be closed: a response left unread
/// becomes closable with time alone.
const CAP_RECHECK: Duration = Duration::from_millis(100);

impl Default for ServerConfig {
    /// 10 s for headers, 10 s for a response left unread, 5 s of grace,
    /// 256 connections.
    fn default() -> Self {
        ServerConfig {
            header_read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ServerConfig {
    /// With `timeout` for a request's headers.
    #[must_use]
    pub fn with_header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// With `timeout` for a client to read a response.
    #[must_use]
    pub fn with_write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// With `grace` for in-flight requests after shutdown starts.
    #[must_use]
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// With `n` connections open at once (at least 1).
    #[must_use]
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting, lets in-flight requests finish (up to the grace period) and
/// returns. The listener's backlog is raised to 1024 (a listener bound
/// with `std::net` has 128), so that a burst of connections waits to be
/// accepted instead of being dropped.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    if let Err(err) = rustix::net::listen(&listener, LISTEN_BACKLOG) {
        // The listener keeps the backlog it was made with.
        tracing::debug!("cannot raise the listen backlog: {err}");
    }
    let (closing_tx, closing_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut connections = Connections::new();
    let max_connections = config.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut cap_logged: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors and the like: back off rather than spin.
                tracing::warn!("cannot accept a connection: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Collect finished connection tasks so the set does not grow.
        while tasks.try_join_next().is_some() {}
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if cap_logged.is_none_or(|at| at.elapsed() >= CAP_LOG_INTERVAL) {
                    cap_logged = Some(Instant::now());
                    tracing::warn!(
                        "{max_connections} connections open, the limit (--max-connections): \
                         closing those waiting longest for a request to admit new ones"
                    );
                }
                let admitted = tokio::select! {
                    () = &mut shutdown => break,
                    slot = make_room(&mut connections, &slots, max_connections) => slot,
                };
                match admitted {
                    Some(slot) => slot,
                    // The semaphore is never closed.
                    None => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let state = connections.state();
        let io = TokioIo::new(TrackedIo::new(
            stream,
            Arc::clone(&state),
            config.write_timeout,
        ));
        let service =
            TrackedService::new(TowerToHyperService::new(router.clone()), Arc::clone(&state));
        let mut closing = closing_rx.clone();
        let task = tasks.spawn(async move {
            // Held until the connection is done (or closed to make room),
            // then frees its place.
            let _slot = slot;
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(config.header_read_timeout)
                // A client may send its request and then shut down its
                // sending side (`nc -N`, some probes); without this, hyper
                // takes that end of input for the client going away and
                // drops the connection unanswered.
                .half_close(true);
            let connection = builder.serve_connection(io, service);
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                _ = closing.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = result {
                tracing::debug!("connection from {peer}: {err}");
            }
        });
        connections.add(state, task);
    }
    drop(listener);
    let _ = closing_tx.send(true);
    let drained = tokio::time::timeout(config.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "{} connections still open after {:?}; closing them",
            tasks.len(),
            config.shutdown_grace
        );
        tasks.abort_all();
    }
    Ok(())
}

/// A place for a connection at the cap: closes the open connections that
/// can best be spared (see the `connections` module), a sixteenth of the
/// cap at a time, and takes the first place they free; while none can be
/// closed (every one is answering a request, or was just accepted and not
/// read from yet), waits for one to finish or become closable. Closing
/// several at once spares the connections that arrive next the wait for a
/// closed one's task to run: in a flood, that wait would be paid once per
/// connection, and a scrape queued behind hundreds of them would pay it
/// hundreds of times. `None` if the semaphore is closed.
async fn make_room(
    connections: &mut Connections,
    slots: &Arc<Semaphore>,
    max_connections: usize,
) -> Option<OwnedSemaphorePermit> {
    let closable = connections.closable();
    loop {
        if connections.close(max_connections.div_ceil(16)) > 0 {
            // A closed connection's task frees its place as soon as it runs.
            return Arc::clone(slots).acquire_owned().await.ok();
        }
        tokio::select! {
            slot = Arc::clone(slots).acquire_owned() => return slot.ok(),
            () = closable.notified() => {}
            () = tokio::time::sleep(CAP_RECHECK) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_client_that_stops_sending_still_gets_its_answer() {
        // Slow enough that the end of input arrives while the request is
        // being handled.
        let router = Router::new().route(
            "/",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                "answered"
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router, ServerConfig::default(), async {
            let _ = stopped.await;
        }));
        let response = tokio::task::spawn_blocking(move || {
            let mut stream = TcpStream::connect(address).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                .unwrap();
            stream.shutdown(Shutdown::Write).unwrap();
            let mut response = String::new();
            let _ = stream.read_to_string(&mut response);
            response
        })
        .await
        .unwrap();
        let _ = stop.send(());
        server.await.unwrap().unwrap();
        assert!(
            response.starts_with("HTTP/1.1 200 OK\r\n") && response.ends_with("answered"),
            "{response:?}"
        );
    }

    /// Serves `router` with `config` on a loopback port until the returned
    /// sender is used or dropped.
    async fn start(
        router: Router,
        config: ServerConfig,
    ) -> (
        std::net::SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router, config, async {
            let _ = stopped.await;
        }));
        (address, stop, server)
    }

    fn send(address: std::net::SocketAddr, path: &str) -> TcpStream {
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .unwrap();
        stream
    }

    fn answer(mut stream: TcpStream) -> String {
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_the_cap_an_idle_connection_makes_room_and_a_busy_one_does_not() {
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let router = Router::new()
            .route(
                "/slow",
                axum::routing::get(move || {
                    let _ = started_tx.send(());
                    async {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        "slow"
                    }
                }),
            )
            .route("/", axum::routing::get(|| async { "fast" }));
        let config = ServerConfig {
            max_connections: 2,
            ..ServerConfig::default()
        };
        let (address, stop, server) = start(router, config).await;
        let (busy, idle, fast) = tokio::task::spawn_blocking(move || {
            // Older than the idle one, but being answered.
            let busy = send(address, "/slow");
            started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
            let mut idle = TcpStream::connect(address).unwrap();
            idle.set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let fast = answer(send(address, "/"));
            let idle = idle.read(&mut [0u8; 1]).map_err(|e| e.kind());
            (answer(busy), idle, fast)
        })
        .await
        .unwrap();
        let _ = stop.send(());
        server.await.unwrap().unwrap();
        assert!(fast.ends_with("fast"), "{fast:?}");
        assert_eq!(idle, Ok(0), "the idle connection was not closed");
        assert!(busy.ends_with("slow"), "{busy:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_response_left_unread_is_dropped_with_its_connection() {
        // Far more than the socket buffers of a loopback connection hold.
        const SIZE: usize = 64 << 20;
        let router = Router::new().route("/big", axum::routing::get(|| async { vec![b'x'; SIZE] }));
        let config = ServerConfig {
            write_timeout: Duration::from_millis(300),
            ..ServerConfig::default()
        };
        let (address, stop, server) = start(router, config).await;
        let received = tokio::task::spawn_blocking(move || {
            let mut stream = send(address, "/big");
            // Long past the write timeout before reading anything.
            std::thread::sleep(Duration::from_secs(2));
            let mut received = 0;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break received,
                    Ok(n) => received += n,
                }
            }
        })
        .await
        .unwrap();
        let _ = stop.send(());
        server.await.unwrap().unwrap();
        assert!(received < SIZE, "the whole response came: {received} bytes");
    }
}
