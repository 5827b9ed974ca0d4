//! [`serve`]: an HTTP/1.1 accept loop with the timeouts `axum::serve` lacks.
//!
//! Each connection runs in its own task, so a slow or stalled client only
//! ever holds its own connection: request headers must arrive within
//! [`ServerConfig::header_read_timeout`] (slowloris), and on shutdown
//! in-flight requests get [`ServerConfig::shutdown_grace`] to finish. A
//! client that closes its sending side after its request still gets the
//! answer.
//!
//! Open connections are capped ([`ServerConfig::max_connections`]): each
//! holds a task and its buffers, so without a cap a client opening
//! connections without end would grow the process without end. At the cap
//! the loop stops accepting; new connections wait in the kernel's listen
//! backlog and are served as soon as one closes (a stalled one is closed by
//! the header timeout at the latest), so a scrape is delayed, not refused.
//! Reaching the cap is logged, at most once a minute.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Connection-level limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    /// A connection whose request headers are not complete within this time
    /// (from the first byte, or from the end of the previous response on a
    /// kept-alive connection) is closed.
    pub header_read_timeout: Duration,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_grace: Duration,
    /// Connections open at once (at least 1); more wait to be accepted.
    pub max_connections: usize,
}

/// The default [`ServerConfig::max_connections`]: far more than Prometheus
/// servers and people at a status page open, few enough that a client
/// opening connections without end costs a bounded amount of memory.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How often reaching the connection cap may be logged.
const CAP_LOG_INTERVAL: Duration = Duration::from_secs(60);

impl Default for ServerConfig {
    /// 10 s for headers, 5 s of grace, 256 connections.
    fn default() -> Self {
        ServerConfig {
            header_read_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting, lets in-flight requests finish (up to the grace period) and
/// returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let (closing_tx, closing_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let max_connections = config.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut cap_logged: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        // Collect finished connection tasks so the set does not grow.
        while connections.try_join_next().is_some() {}
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if cap_logged.is_none_or(|at| at.elapsed() >= CAP_LOG_INTERVAL) {
                    cap_logged = Some(Instant::now());
                    tracing::warn!(
                        "{max_connections} connections open, the limit (--max-connections): \
                         new connections wait until one closes"
                    );
                }
                let acquired = tokio::select! {
                    () = &mut shutdown => break,
                    slot = Arc::clone(&slots).acquire_owned() => slot,
                };
                match acquired {
                    Ok(slot) => slot,
                    // The semaphore is never closed.
                    Err(_) => break,
                }
            }
        };
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
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut closing = closing_rx.clone();
        connections.spawn(async move {
            // Held until the connection is done, then frees its place.
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
            let connection = builder.serve_connection(TokioIo::new(stream), service);
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
    }
    drop(listener);
    let _ = closing_tx.send(true);
    let drained = tokio::time::timeout(config.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "{} connections still open after {:?}; closing them",
            connections.len(),
            config.shutdown_grace
        );
        connections.abort_all();
    }
    Ok(())
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
}
