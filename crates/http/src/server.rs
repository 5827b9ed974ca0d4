//! [`serve`]: an HTTP/1.1 accept loop with the timeouts `axum::serve` lacks.
//!
//! Each connection runs in its own task, so a slow or stalled client only
//! ever holds its own connection: request headers must arrive within
//! [`ServerConfig::header_read_timeout`] (slowloris), and on shutdown
//! in-flight requests get [`ServerConfig::shutdown_grace`] to finish.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
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
}

impl Default for ServerConfig {
    /// 10 s for headers, 5 s of grace.
    fn default() -> Self {
        ServerConfig {
            header_read_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
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
    tokio::pin!(shutdown);
    loop {
        // Collect finished connection tasks so the set does not grow.
        while connections.try_join_next().is_some() {}
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
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(config.header_read_timeout);
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
