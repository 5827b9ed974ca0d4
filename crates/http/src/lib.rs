//! The multiprom HTTP endpoint as a library: mount it in your own axum app,
//! or run it with [`serve`] as `multiprom serve` and `multiprom run` do.
//!
//! * [`Endpoint`]: one directory's `GET /metrics` (text 0.0.4 or OpenMetrics
//!   by `Accept`, gzip by `Accept-Encoding`, `multiprom_*` self-metrics and
//!   `process_*` metrics appended), `GET /` (an HTML status page),
//!   `GET /-/healthy` and `GET /-/ready`, with bounded, timed collections
//!   off the async workers ([`EndpointConfig`]).
//! * [`serve`]: an HTTP/1.1 accept loop with header-read and write
//!   timeouts, a cap on open connections that a flood of idle or slow ones
//!   cannot use to keep a scrape out, and graceful shutdown
//!   ([`ServerConfig`]).
//!
//! It only serves. What is done *to* the directory (reaping exited
//! workers' live gauges, compaction) is `multiprom-maintain`'s: the host
//! owns the collector and the `Maintainer`, makes the collector collect as
//! the maintainer needs (`Maintainer::govern`: settled files, retired live
//! gauges left out), hands the collector to the endpoint and the
//! maintainer to its passes, and the endpoint shows what the maintainer
//! has done ([`EndpointConfig::maintainer`]).
//!
//! Collections are timed: the endpoint needs a tokio runtime with its time
//! driver on (`#[tokio::main]`, or a `Builder` with `enable_time` or
//! `enable_all`).
//!
//! [`Endpoint::router`] is a whole server's routes (the status page at `/`
//! and a 404 fallback included); in an app with routes of its own, merge
//! [`Endpoint::metrics_router`], the metrics path alone:
//!
//! ```no_run
//! # async fn host() -> std::io::Result<()> {
//! use multiprom_collector::DirCollector;
//! use multiprom_http::{Endpoint, EndpointConfig};
//!
//! let metrics = Endpoint::new(DirCollector::new("/run/metrics"), EndpointConfig::default());
//! let app = axum::Router::new()
//!     .route("/healthz", axum::routing::get(|| async { "ok" }))
//!     .merge(metrics.metrics_router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! multiprom_http::serve(listener, app, Default::default(), std::future::pending()).await
//! # }
//! ```

mod connections;
mod endpoint;
mod html;
mod latest_exemplar;
mod listability;
mod metrics_path;
#[cfg(test)]
mod mount_tests;
#[cfg(test)]
mod overload_tests;
mod plain_response;
mod probes;
mod process_metrics;
mod scrape_failure;
mod scrape_log;
mod self_metrics;
mod server;
mod status_page;
mod text_pool;
mod tracked_io;
mod tracked_service;

pub use endpoint::{Endpoint, EndpointConfig, ScrapeFailure, SiblingReport};
pub use metrics_path::{valid_metrics_path, MetricsPathError, DEFAULT_METRICS_PATH};
pub use server::{serve, ServerConfig, DEFAULT_MAX_CONNECTIONS};
