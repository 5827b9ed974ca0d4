//! [`Endpoint`]: the shared state behind `/metrics` and `/`, and its router.
//!
//! Every collection goes through one gate: at most
//! [`EndpointConfig::max_concurrent_scrapes`] run at once (a request waits up
//! to [`EndpointConfig::scrape_queue_wait`] for a slot, then gets 503), each
//! runs on tokio's blocking pool (file reading never blocks the async
//! workers) and a response waits at most [`EndpointConfig::scrape_timeout`]
//! for it (then 503). A timed-out collection keeps its slot until it really
//! finishes, so a hung filesystem cannot pile up threads. Slots are held only
//! while collecting and encoding, never while a response is being sent, so a
//! slow client cannot hold one.

use std::collections::HashSet;
use std::fmt;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use multiprom_collector::exposition::LineCache;
use multiprom_collector::{CollectError, DirCollector, Format, NameFilter, Scrape};
use tokio::sync::Semaphore;

use crate::compact::{check_writers_visible, CompactError, CompactPass, Compactor, Step};
use crate::dir_health::DirHealth;
use crate::health;
use crate::negotiate::{accepts_gzip, choose_format};
use crate::process::{is_gone, process_state};
use crate::process_metrics;
use crate::reap::{ReapPass, Reaper, DEFAULT_REAP_GRACE};
use crate::self_metrics::{gauge, reserved_names, without_clashes, ScrapeResult, SelfMetrics};
use crate::status_page::{
    html_escape, render_status_page, status_page_index, ScrapePoint, StatusView,
};
use crate::text_pool::TextPool;
use crate::writers_seen::WritersSeen;

/// Limits and behaviour of an [`Endpoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointConfig {
    /// Collections allowed at once (at least 1).
    pub max_concurrent_scrapes: usize,
    /// How long a request waits for a free slot before it gets 503.
    pub scrape_queue_wait: Duration,
    /// How long a request waits for its collection before it gets 503.
    pub scrape_timeout: Duration,
    /// Leave the `gauge_live*` files of exited processes out of every
    /// collection, and remove them `reap_grace` after their process is gone
    /// (see [`crate::reap`] for why this never races the application's own
    /// `mark_process_dead`, and for the caveats).
    pub reap_dead: bool,
    /// How long a live-gauge file's process must have been gone before the
    /// file is removed.
    pub reap_grace: Duration,
    /// Fold exited workers' files into one file per kind when
    /// [`Endpoint::compact`] is called (see [`crate::compact`]). Refused,
    /// with a warning, where the writers' processes cannot be seen.
    pub compact: bool,
    /// Add `multiprom_worker_process_*{pid}` (CPU, resident memory, start
    /// time) for every live process that writes to the directory, read
    /// from `/proc`. Only where the writers' pids are visible (same pid
    /// namespace), as for reaping.
    pub worker_process_metrics: bool,
}

impl Default for EndpointConfig {
    /// 4 at once, 1 s wait, 10 s timeout (Prometheus' default
    /// `scrape_timeout`), no reaping (five minutes' grace when it is on).
    fn default() -> Self {
        EndpointConfig {
            max_concurrent_scrapes: 4,
            scrape_queue_wait: Duration::from_secs(1),
            scrape_timeout: Duration::from_secs(10),
            reap_dead: false,
            reap_grace: DEFAULT_REAP_GRACE,
            compact: false,
            worker_process_metrics: false,
        }
    }
}

/// Why a bounded collection produced no result.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeFailure {
    /// Every slot stayed busy for the whole queue wait.
    #[error("too many scrapes at once (limit {limit}); try again")]
    Busy {
        /// The slot count.
        limit: usize,
    },
    /// The collection overran the timeout.
    #[error("scrape timed out after {0:?}")]
    Timeout(Duration),
    /// The directory could not be listed.
    #[error(transparent)]
    Collect(#[from] CollectError),
    /// The collection panicked (a bug); the next one starts afresh.
    #[error("scrape failed: {0}")]
    Panicked(String),
}

impl ScrapeFailure {
    fn result(&self) -> ScrapeResult {
        match self {
            ScrapeFailure::Busy { .. } => ScrapeResult::Busy,
            ScrapeFailure::Timeout(_) => ScrapeResult::Timeout,
            ScrapeFailure::Collect(_) | ScrapeFailure::Panicked(_) => ScrapeResult::Error,
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ScrapeFailure::Busy { .. } | ScrapeFailure::Timeout(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ScrapeFailure::Collect(_) | ScrapeFailure::Panicked(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

/// Called on the blocking pool before each collection, while it holds its
/// scrape slot: lets the overload tests hold a collection.
pub(crate) type BeforeCollect = Arc<dyn Fn() + Send + Sync>;

struct Inner {
    collector: DirCollector,
    config: EndpointConfig,
    permits: Arc<Semaphore>,
    metrics: SelfMetrics,
    before_collect: Option<BeforeCollect>,
    /// Retires and removes exited processes' live-gauge files, when on.
    reaper: Option<Mutex<Reaper>>,
    /// Folds exited workers' files, when on and possible.
    compactor: Option<Mutex<Compaction>>,
    /// The last collection whose warnings were logged.
    logged_collection: AtomicU64,
    /// Self-metric names already reported as shadowed by worker families.
    shadowed_reported: Mutex<HashSet<String>>,
    /// Whether the directory could be listed, for logging changes once.
    dir_health: DirHealth,
    /// The last collections, oldest first, for the status page's chart.
    history: Mutex<std::collections::VecDeque<ScrapePoint>>,
    /// Without reaping: whether the writers are visible, looked for until
    /// they are (files of gone writers are settled only then).
    writers_seen: Option<Arc<WritersSeen>>,
    /// The last encodings' sample lines, per format and filter.
    line_caches: Mutex<Vec<(Format, Option<NameFilter>, LineCache)>>,
    /// Buffers for `/metrics` bodies.
    texts: Arc<TextPool>,
}

/// Collections the status page's chart shows.
const HISTORY: usize = 120;

/// The metrics endpoint of one directory: cheap to clone, shared by all
/// requests.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use multiprom_collector::DirCollector;
/// use multiprom_http::{serve, Endpoint, EndpointConfig, ServerConfig};
///
/// let endpoint = Endpoint::new(DirCollector::new("/run/metrics"), EndpointConfig::default());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9478").await?;
/// serve(listener, endpoint.router(), ServerConfig::default(), std::future::pending()).await
/// # }
/// ```
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<Inner>,
    /// Where [`Endpoint::router`] serves the metrics.
    metrics_path: Arc<str>,
}

/// The default path of the metrics.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("dir", &self.inner.collector.dir())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint for `collector`'s directory.
    #[must_use]
    pub fn new(collector: DirCollector, config: EndpointConfig) -> Self {
        Endpoint::with_before_collect(collector, config, None)
    }

    /// Like [`Endpoint::new`], with a function run on the blocking pool
    /// before each collection (while holding its slot).
    #[must_use]
    pub(crate) fn with_before_collect(
        collector: DirCollector,
        config: EndpointConfig,
        before_collect: Option<BeforeCollect>,
    ) -> Self {
        let config = EndpointConfig {
            max_concurrent_scrapes: config.max_concurrent_scrapes.max(1),
            ..config
        };
        // A file whose pid no process has cannot change until it is opened
        // again, so it need not be read again: where the writers' pids are
        // visible. Reaping is only for there (see `crate::reap`); otherwise
        // only once a writer has been seen here (see `writers_seen`).
        let writers_seen = Arc::new(WritersSeen::new(collector.dir()));
        let collector = if config.reap_dead {
            collector.settle_exited_writers(|name| name.pid().is_some_and(is_gone))
        } else {
            let seen = Arc::clone(&writers_seen);
            collector
                .settle_exited_writers(move |name| seen.seen() && name.pid().is_some_and(is_gone))
        };
        let compactor = config
            .compact
            .then(|| start_compaction(&collector))
            .flatten();
        let mut metrics = SelfMetrics::new();
        if compactor.is_some() {
            metrics.register_compaction();
        }
        Endpoint {
            inner: Arc::new(Inner {
                collector,
                permits: Arc::new(Semaphore::new(config.max_concurrent_scrapes)),
                config,
                metrics,
                compactor: compactor.map(Mutex::new),
                before_collect,
                reaper: config
                    .reap_dead
                    .then(|| Mutex::new(Reaper::new(config.reap_grace))),
                logged_collection: AtomicU64::new(0),
                shadowed_reported: Mutex::new(HashSet::new()),
                dir_health: DirHealth::default(),
                history: Mutex::new(std::collections::VecDeque::with_capacity(HISTORY)),
                writers_seen: (!config.reap_dead).then_some(writers_seen),
                line_caches: Mutex::new(Vec::new()),
                texts: Arc::new(TextPool::default()),
            }),
            metrics_path: Arc::from(DEFAULT_METRICS_PATH),
        }
    }

    /// The same endpoint with the metrics at `path` (Prometheus calls it the
    /// telemetry path) instead of `/metrics`. `path` must start with `/` and
    /// must not be `/` or under `/-/` (those are the status page and the
    /// health checks); such a path is ignored and `/metrics` kept.
    #[must_use]
    pub fn with_metrics_path(mut self, path: &str) -> Self {
        if valid_metrics_path(path).is_ok() {
            self.metrics_path = Arc::from(path);
        }
        self
    }

    /// Where the metrics are served.
    #[must_use]
    pub fn metrics_path(&self) -> &str {
        &self.metrics_path
    }

    /// The directory served.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.inner.collector.dir()
    }

    /// The configuration in force.
    #[must_use]
    pub fn config(&self) -> EndpointConfig {
        self.inner.config
    }

    /// `GET|HEAD` on the metrics path (`/metrics` unless
    /// [`Endpoint::with_metrics_path`]), `/` (status page), `/-/healthy`
    /// and `/-/ready`; 405 for other methods on those paths, 404 elsewhere.
    /// Mount it (or [`Router::nest`] it) in a host app.
    pub fn router(&self) -> Router {
        Router::new()
            .route(&self.metrics_path, get(metrics_handler))
            .route("/", get(status_handler))
            .route("/-/healthy", get(health::healthy))
            .route("/-/ready", get(health::ready))
            .fallback(not_found)
            .with_state(self.clone())
    }

    /// One bounded collection, encoded in `format` with the self-metrics
    /// appended: exactly the `/metrics` body.
    ///
    /// A directory that cannot be listed (deleted, unmounted) is not an
    /// error here: the answer holds only the self-metrics, with
    /// `multiprom_directory_listable 0`, so the target stays up and says
    /// what is wrong; it is logged once, and once more when it is back.
    ///
    /// With a `filter` (`?name[]=`), only the samples it names are
    /// collected and served, multiprom's own included.
    pub async fn metrics(
        &self,
        format: Format,
        filter: Option<NameFilter>,
    ) -> Result<String, ScrapeFailure> {
        let kept = filter.clone();
        let result = self
            .bounded(filter.clone(), move |inner, scrape| {
                inner.dir_health.listed(inner.collector.dir());
                inner.render_metrics(scrape, format, kept.as_ref())
            })
            .await;
        match result {
            Err(ScrapeFailure::Collect(err)) => {
                self.inner.metrics.count_scrape(ScrapeResult::Error);
                self.inner.dir_health.failed(&err);
                Ok(self.inner.render_unlistable(format, filter.as_ref()))
            }
            Err(failure) => {
                self.inner.metrics.count_scrape(failure.result());
                Err(failure)
            }
            Ok(body) => Ok(body),
        }
    }

    /// One bounded collection, as the `GET /` HTML page.
    ///
    /// `page` is the page of the file table (0-based). A directory that
    /// cannot be listed gives a page that says so, not an error.
    pub async fn status_page(&self, page: usize) -> Result<String, ScrapeFailure> {
        let metrics_path = self.metrics_path.clone();
        let result = self
            .bounded(None, move |inner, scrape| {
                let history = inner.history_snapshot();
                let view = StatusView {
                    metrics_path: &metrics_path,
                    page,
                    history: &history,
                };
                let html = render_status_page(inner.collector.dir(), scrape, view, process_state);
                match &inner.metrics.compaction {
                    Some(totals) => with_compaction_line(html, &totals.summary()),
                    None => html,
                }
            })
            .await;
        match result {
            Err(ScrapeFailure::Collect(err)) => {
                self.inner.dir_health.failed(&err);
                let err = html_escape(&err.to_string());
                Ok(format!(
                    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>multiprom</title></head>\
<body><h1>multiprom</h1>\n<p id=\"problems\" style=\"background:#fdd\">{err}</p>\n\
<p>Scrapes answer with multiprom's own metrics only until the directory is back.</p></body></html>\n"
                ))
            }
            other => other,
        }
    }

    /// One reaping pass now (on the blocking pool): removes the
    /// `gauge_live*` files whose process has been gone for the grace period,
    /// logging and counting what was removed. Does nothing unless
    /// [`EndpointConfig::reap_dead`] is set.
    pub async fn reap(&self) -> std::io::Result<ReapPass> {
        if self.inner.reaper.is_none() {
            return Ok(ReapPass::default());
        }
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let paths = multiprom_collector::scan_dir(inner.collector.dir()).inspect_err(|e| {
                tracing::warn!(
                    "cannot check {} for dead processes: {e}",
                    inner.collector.dir().display()
                );
            })?;
            Ok(inner.reap(&std::sync::Arc::new(paths)))
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Whether compaction is on (asked for, and the writers are visible).
    #[must_use]
    pub fn compacting(&self) -> bool {
        self.inner.compactor.is_some()
    }

    /// One compaction pass now (on the blocking pool, while no scrape of
    /// this endpoint collects), logged and counted. `None` when compaction
    /// is off.
    pub async fn compact(&self) -> Option<Result<CompactPass, CompactError>> {
        self.inner.compactor.as_ref()?;
        let inner = self.inner.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let compaction = inner.compactor.as_ref()?;
            let mut compaction = compaction
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !compaction.writers_visible {
                if check_writers_visible(inner.collector.dir()).is_err() {
                    return Some(Ok(CompactPass::default()));
                }
                tracing::info!(
                    "a writer of {} is visible now: compacting",
                    inner.collector.dir().display()
                );
                compaction.writers_visible = true;
            }
            let result = inner
                .collector
                .while_not_collecting(|| compaction.compactor.pass(&mut |_| {}));
            log_compaction(inner.collector.dir(), &result);
            if let Some(totals) = &inner.metrics.compaction {
                totals.record(&result);
            }
            Some(result)
        })
        .await;
        joined.ok().flatten()
    }

    async fn bounded<T: Send + 'static>(
        &self,
        filter: Option<NameFilter>,
        finish: impl FnOnce(&Inner, &Arc<Scrape>) -> T + Send + 'static,
    ) -> Result<T, ScrapeFailure> {
        let inner = self.inner.clone();
        let config = inner.config;
        let permit = match tokio::time::timeout(
            config.scrape_queue_wait,
            inner.permits.clone().acquire_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => permit,
            // Timed out, or the semaphore was closed (it never is).
            _ => {
                return Err(ScrapeFailure::Busy {
                    limit: config.max_concurrent_scrapes,
                })
            }
        };
        let task = tokio::task::spawn_blocking(move || {
            let _slot = permit;
            if let Some(hook) = &inner.before_collect {
                hook();
            }
            if let Some(writers_seen) = &inner.writers_seen {
                writers_seen.look_if_due();
            }
            // One listing serves both: the reaper picks the exited
            // processes' live-gauge files to leave out, the rest is merged.
            let mut left_out = 0;
            let scrape = inner.collector.collect_without(
                |paths| {
                    let retired = inner.reap(paths).retired;
                    left_out = retired.len();
                    retired
                },
                filter.as_ref(),
            )?;
            // A collection shared by concurrent requests is reported once.
            let collection = scrape.stats.collection;
            if inner
                .logged_collection
                .fetch_max(collection, Ordering::Relaxed)
                < collection
            {
                for warning in &scrape.warnings {
                    tracing::warn!("{warning}");
                }
                crate::scrape_log::log_scrape(inner.collector.dir(), &scrape, left_out);
                inner.remember(&scrape);
            }
            Ok::<T, CollectError>(finish(&inner, &scrape))
        });
        match tokio::time::timeout(config.scrape_timeout, task).await {
            Err(_) => Err(ScrapeFailure::Timeout(config.scrape_timeout)),
            Ok(Err(join)) => Err(ScrapeFailure::Panicked(join.to_string())),
            Ok(Ok(result)) => Ok(result?),
        }
    }
}

impl Inner {
    /// Adds a collection to the chart's history.
    fn remember(&self, scrape: &Scrape) {
        let mut history = self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if history.len() == HISTORY {
            history.pop_front();
        }
        history.push_back(ScrapePoint {
            duration: scrape.stats.duration,
            files: scrape.files.len(),
        });
    }

    fn history_snapshot(&self) -> Vec<ScrapePoint> {
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .copied()
            .collect()
    }

    /// One reaping pass over a listing (nothing when reaping is off).
    fn reap(&self, paths: &Arc<Vec<std::path::PathBuf>>) -> ReapPass {
        let Some(reaper) = &self.reaper else {
            return ReapPass::default();
        };
        let mut reaper = reaper
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut pass = reaper.pass(paths);
        let leftovers = reaper.recover_leftovers(self.collector.dir());
        pass.removed.extend(leftovers.removed);
        pass.failed.extend(leftovers.failed);
        // Counted under the lock: a scrape whose pass comes next must see
        // what this pass removed.
        self.metrics.count_reaped(pass.removed.len());
        drop(reaper);
        for (path, pid) in &pass.removed {
            tracing::info!("removed {}: process {pid} is gone", path.display());
        }
        for (path, err) in &pass.failed {
            tracing::warn!("cannot remove {} of a dead process: {err}", path.display());
        }
        pass
    }

    /// The `/metrics` body when the directory cannot be listed: the
    /// self-metrics alone, the last scrape's numbers at zero.
    fn render_unlistable(&self, format: Format, filter: Option<&NameFilter>) -> String {
        let mut own = self.metrics.record_nothing_read();
        own.push(directory_listable(false));
        own.extend(process_metrics::own());
        if let Some(filter) = filter {
            own = filter.restrict(own);
        }
        let mut out = String::new();
        format.encode(&own, &mut out);
        out
    }

    fn render_metrics(
        &self,
        scrape: &Arc<Scrape>,
        format: Format,
        filter: Option<&NameFilter>,
    ) -> String {
        let mut out = self.texts.take(128 * scrape.stats.series + 4096);
        self.encode_families(scrape, format, filter, &mut out);
        if format == Format::OpenMetrics {
            // One `# EOF`, at the very end, after the self-metrics.
            if let Some(body) = out.strip_suffix("# EOF\n") {
                out.truncate(body.len());
            }
        }
        let mut own = self.metrics.record(&scrape.stats);
        own.push(directory_listable(true));
        // What reads `/proc` is skipped when the filter cannot keep it (a
        // router polling a few families many times a second).
        let wanted =
            |prefix: &str| filter.is_none_or(|f| f.names().any(|name| name.starts_with(prefix)));
        if wanted("process_") {
            own.extend(process_metrics::own());
        }
        if self.config.worker_process_metrics && wanted("multiprom_worker_process_") {
            own.extend(process_metrics::workers(&scrape.files));
        }
        if let Some(filter) = filter {
            own = filter.restrict(own);
        }
        let reserved = reserved_names(&scrape.families);
        let (own, shadowed) = without_clashes(own, &reserved);
        // OpenMetrics: the encoder ends with the one `# EOF`.
        format.encode(&own, &mut out);
        if !shadowed.is_empty() {
            let mut reported = self
                .shadowed_reported
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for name in shadowed {
                if reported.insert(name.to_string()) {
                    tracing::warn!(
                        "a worker metric is named like multiprom's own {name}: serving the worker's, leaving out multiprom's"
                    );
                }
            }
        }
        out
    }
}

impl Inner {
    /// The workers' families in `format`, through the line cache of this
    /// format and filter when no other scrape is using it (then afresh).
    fn encode_families(
        &self,
        scrape: &Arc<Scrape>,
        format: Format,
        filter: Option<&NameFilter>,
        out: &mut String,
    ) {
        let Ok(mut caches) = self.line_caches.try_lock() else {
            format.encode(&scrape.families, out);
            return;
        };
        let at = match caches
            .iter()
            .position(|(f, names, _)| *f == format && names.as_ref() == filter)
        {
            Some(at) => at,
            None => {
                if caches.len() >= LINE_CACHES {
                    caches.remove(0);
                }
                caches.push((format, filter.cloned(), LineCache::default()));
                caches.len() - 1
            }
        };
        caches[at].2.encode(format, Arc::clone(scrape), out);
    }
}

/// Line caches kept, one per format and filter: Prometheus and a person in
/// both formats, and routers with a few fixed sets of names.
const LINE_CACHES: usize = 8;

/// `multiprom_directory_listable`: 1 when the last scrape could list the
/// directory, 0 when it could not (and served only the self-metrics).
fn directory_listable(listable: bool) -> multiprom_collector::MergedFamily {
    gauge(
        "multiprom_directory_listable",
        "1 if the last scrape could list the directory, 0 if it could not (then only multiprom's own metrics are served).",
        if listable { 1.0 } else { 0.0 },
    )
}

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

pub(crate) fn plain(status: StatusCode, message: String) -> Response {
    let mut response = (status, message + "\n").into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_PLAIN));
    response
}

fn failure_response(failure: &ScrapeFailure) -> Response {
    match failure {
        ScrapeFailure::Busy { .. } | ScrapeFailure::Timeout(_) => {
            tracing::warn!("answering 503: {failure}")
        }
        _ => tracing::error!("answering 500: {failure}"),
    }
    let mut response = plain(failure.status(), format!("multiprom: {failure}"));
    if failure.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    // Several Accept headers mean one comma-joined list; we read the first,
    // which is what clients send in practice.
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn metrics_handler(
    State(endpoint): State<Endpoint>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let Some(format) = choose_format(header_str(&headers, header::ACCEPT)) else {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            format!(
                "multiprom: no acceptable format; /metrics serves \"{}\" and \"{}\"",
                Format::Prometheus.content_type(),
                Format::OpenMetrics.content_type()
            ),
        );
    };
    let gzip = accepts_gzip(header_str(&headers, header::ACCEPT_ENCODING));
    let filter = query.as_deref().and_then(name_filter);
    let body = match endpoint.metrics(format, filter).await {
        Ok(body) => body,
        Err(failure) => return failure_response(&failure),
    };
    let (bytes, encoding) = match gzip.then(|| gzip_bytes(body.as_bytes())) {
        Some(Ok(compressed)) => {
            // The text's buffer goes back to the pool right away.
            drop(endpoint.inner.texts.body(body));
            (Bytes::from(compressed), Some("gzip"))
        }
        _ => (endpoint.inner.texts.body(body), None),
    };
    let mut response = Response::new(Body::empty());
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    h.insert(
        header::VARY,
        HeaderValue::from_static("Accept, Accept-Encoding"),
    );
    if let Some(encoding) = encoding {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    // Set explicitly so HEAD answers carry the length GET would send.
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    *response.body_mut() = Body::from(bytes);
    response
}

/// The `name[]` parameters of a query, as `prometheus_client`'s handlers
/// read them (`urllib.parse.parse_qs`: `+` and `%XX` decoded, parameters
/// with an empty value dropped): `None` when there are none, so the whole
/// registry is served.
fn name_filter(query: &str) -> Option<NameFilter> {
    let mut names = form_urlencoded::parse(query.as_bytes())
        .filter(|(key, value)| key == "name[]" && !value.is_empty())
        .map(|(_, value)| value)
        .peekable();
    names.peek()?;
    Some(NameFilter::new(names))
}

/// `bytes` gzipped at the fastest level. A poll of a 750 kB answer of
/// 10,000 series with `Accept-Encoding: gzip` (Go's HTTP client asks for it
/// by default) cost 24 ms of processor time at the default level, 5 ms at
/// this one, for an answer a tenth bigger (150 against about 140 kB); a
/// router polling many times a second pays it on every poll.
fn gzip_bytes(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4 + 64),
        flate2::Compression::fast(),
    );
    encoder.write_all(bytes)?;
    encoder.finish()
}

async fn status_handler(State(endpoint): State<Endpoint>, RawQuery(query): RawQuery) -> Response {
    match endpoint
        .status_page(status_page_index(query.as_deref()))
        .await
    {
        Ok(html) => {
            let mut response = html.into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            response
        }
        Err(failure) => failure_response(&failure),
    }
}

async fn not_found(State(endpoint): State<Endpoint>) -> Response {
    plain(
        StatusCode::NOT_FOUND,
        format!(
            "multiprom: not found; metrics are at {}",
            endpoint.metrics_path()
        ),
    )
}

/// Takes charge of compacting the collector's directory, recovering from an
/// earlier process's unfinished pass; `None` (with a warning saying why)
/// where that is not safe or not possible.
fn start_compaction(collector: &DirCollector) -> Option<Compaction> {
    let dir = collector.dir();
    let writers_visible = match check_writers_visible(dir) {
        Ok(()) => true,
        Err(why) if why.is_permanent() => {
            tracing::warn!("not compacting {}: {why}", dir.display());
            return None;
        }
        Err(why) => {
            tracing::warn!(
                "not compacting {} yet: {why}; compaction starts once a writer is seen holding its file here",
                dir.display()
            );
            false
        }
    };
    let mut log_step = |step: &Step| {
        if let Step::PutBack(name) = step {
            tracing::info!(
                "compaction recovery: put {name} back into {}",
                dir.display()
            );
        }
    };
    match collector.while_not_collecting(|| Compactor::open(dir, &mut log_step)) {
        Ok((compactor, recovery)) => {
            if let Some(target) = recovery.completed {
                tracing::info!("compaction recovery: finished the interrupted fold into {target}");
            }
            if let Some(target) = recovery.undone {
                tracing::info!("compaction recovery: undid the uncommitted fold into {target}");
            }
            Some(Compaction {
                compactor,
                writers_visible,
            })
        }
        Err(e) => {
            tracing::warn!("not compacting {}: {e}", dir.display());
            None
        }
    }
}

/// The compactor, and whether the directory's writers have been seen from
/// here (passes wait until they have).
struct Compaction {
    compactor: Compactor,
    writers_visible: bool,
}

fn log_compaction(dir: &Path, result: &Result<CompactPass, CompactError>) {
    match result {
        Ok(pass) => {
            for (target, files) in &pass.folded {
                tracing::info!(
                    "compacted {} files of exited workers into {}/{target} (pass took {:.1} ms)",
                    files.len(),
                    dir.display(),
                    pass.duration.as_secs_f64() * 1000.0
                );
            }
            for name in &pass.held {
                tracing::info!("not compacting {name}: a process holds it (a reused pid?)");
            }
            for (name, why) in &pass.skipped {
                tracing::warn!("not compacting {name}: {why}");
            }
        }
        Err(e) => tracing::warn!("compaction of {} failed (nothing lost): {e}", dir.display()),
    }
}

/// The status page with one paragraph about compaction before its end.
fn with_compaction_line(mut html: String, line: &str) -> String {
    let paragraph = format!("<p>{}</p>\n", crate::status_page::html_escape(line));
    let at = html.rfind("</body>").unwrap_or(html.len());
    html.insert_str(at, &paragraph);
    html
}

/// Checks a metrics path: starts with `/`, is not `/` and not under `/-/`.
///
/// ```
/// use multiprom_http::valid_metrics_path;
/// assert!(valid_metrics_path("/federate/metrics").is_ok());
/// assert!(valid_metrics_path("metrics").is_err());
/// assert!(valid_metrics_path("/").is_err());
/// assert!(valid_metrics_path("/-/ready").is_err());
/// ```
pub fn valid_metrics_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} must start with /"));
    }
    if path == "/" || path.starts_with("/-/") {
        return Err(format!(
            "{path:?} is taken: / is the status page, /-/ the health checks"
        ));
    }
    if path.contains(['{', '}', '*', '?', '#']) || path.ends_with('/') {
        return Err(format!(
            "{path:?}: a plain path without a trailing / (e.g. /metrics)"
        ));
    }
    Ok(())
}
