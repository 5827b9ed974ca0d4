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
use multiprom_collector::exposition::{
    encode_protobuf, Body as ExpositionBody, LineCache, ProtobufCache, PROTOBUF_CONTENT_TYPE,
};
use multiprom_collector::{
    CollectError, Escaping, Exemplars, Format, MergedFamily, NameFilter, NativeHistograms, Natives,
    Scrape, ServedView, StartTimes,
};
use tokio::sync::Semaphore;

use multiprom_maintain::Maintainer;

use crate::html::html_escape;
use crate::listability::Listability;
use crate::metrics_path::{valid_metrics_path, DEFAULT_METRICS_PATH};
use crate::plain_response::plain;
use crate::probes;
use crate::process_metrics;
use crate::scrape_failure::failure_response;
pub use crate::scrape_failure::ScrapeFailure;
use crate::self_metrics::{gauge, reserved_names, without_clashes, ScrapeResult, SelfMetrics};
use crate::status_page::{render_status_page, status_page_index, ScrapePoint, StatusView, Writer};
use crate::text_pool::TextPool;
use multiprom_collector::exposition::negotiate::{
    accepts_gzip, choose_exposition, Exposition, Text,
};

/// Limits and behaviour of an [`Endpoint`].
///
/// ```
/// use std::time::Duration;
/// use multiprom_http::EndpointConfig;
///
/// let config = EndpointConfig::default()
///     .with_max_concurrent_scrapes(2)
///     .with_scrape_timeout(Duration::from_secs(5));
/// assert_eq!(config.scrape_queue_wait, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EndpointConfig {
    /// Collections allowed at once (at least 1).
    pub max_concurrent_scrapes: usize,
    /// How long a request waits for a free slot before it gets 503.
    pub scrape_queue_wait: Duration,
    /// How long a request waits for its collection before it gets 503.
    pub scrape_timeout: Duration,
    /// What maintains the directory, if anything: the status page and the
    /// self-metrics show what it has done. The host makes the collector
    /// collect as it needs ([`Maintainer::govern`]) and runs it
    /// ([`Maintainer::run_due`]); the endpoint never does either.
    pub maintainer: Option<Arc<Maintainer>>,
    /// Add `multiprom_worker_process_*{pid}` (CPU, resident memory, start
    /// time) for every live process that writes to the directory, read
    /// from `/proc`. Only where the writers' pids are visible (same pid
    /// namespace), as for reaping.
    pub worker_process_metrics: bool,
    /// The endpoint's siblings over the same view (pushers): their own
    /// metrics are served with multiprom's, and the status page gives each
    /// a line.
    pub siblings: Vec<Arc<dyn SiblingReport>>,
}

/// What a sibling of the endpoint over the same [`ServedView`] (a pusher)
/// reports through it.
pub trait SiblingReport: fmt::Debug + Send + Sync {
    /// Its own metrics, served after multiprom's.
    fn families(&self) -> Vec<MergedFamily>;
    /// One line for the status page.
    fn status_line(&self) -> String;
}

impl Default for EndpointConfig {
    /// 4 at once, 1 s wait, 10 s timeout (Prometheus' default
    /// `scrape_timeout`), no maintainer, no worker process metrics.
    fn default() -> Self {
        EndpointConfig {
            max_concurrent_scrapes: 4,
            scrape_queue_wait: Duration::from_secs(1),
            scrape_timeout: Duration::from_secs(10),
            maintainer: None,
            worker_process_metrics: false,
            siblings: Vec::new(),
        }
    }
}

impl EndpointConfig {
    /// With `n` collections at once (at least 1).
    #[must_use]
    pub fn with_max_concurrent_scrapes(mut self, n: usize) -> Self {
        self.max_concurrent_scrapes = n;
        self
    }

    /// With a request waiting `wait` for a free slot.
    #[must_use]
    pub fn with_scrape_queue_wait(mut self, wait: Duration) -> Self {
        self.scrape_queue_wait = wait;
        self
    }

    /// With a request waiting `timeout` for its collection.
    #[must_use]
    pub fn with_scrape_timeout(mut self, timeout: Duration) -> Self {
        self.scrape_timeout = timeout;
        self
    }

    /// With `maintainer` maintaining the directory.
    #[must_use]
    pub fn with_maintainer(mut self, maintainer: Arc<Maintainer>) -> Self {
        self.maintainer = Some(maintainer);
        self
    }

    /// With `sibling` reporting through the endpoint.
    #[must_use]
    pub fn with_sibling(mut self, sibling: Arc<dyn SiblingReport>) -> Self {
        self.siblings.push(sibling);
        self
    }

    /// With (or without) `multiprom_worker_process_*`.
    #[must_use]
    pub fn with_worker_process_metrics(mut self, on: bool) -> Self {
        self.worker_process_metrics = on;
        self
    }
}

#[cfg(test)]
pub(crate) type BeforeCollect = Arc<dyn Fn() + Send + Sync>;

/// The directory being served: its collector, limits, counters and the
/// caches every request shares.
struct ServedDir {
    view: Arc<ServedView>,
    config: EndpointConfig,
    permits: Arc<Semaphore>,
    metrics: SelfMetrics,
    #[cfg(test)]
    before_collect: Option<BeforeCollect>,
    /// The last collection whose warnings were logged.
    logged_collection: AtomicU64,
    /// The collections made before the first request (`Endpoint::warm_up`):
    /// the log counts scrapes from the first one after them.
    warm_collections: AtomicU64,
    /// Self-metric names already reported as shadowed by worker families.
    shadowed_reported: Mutex<HashSet<String>>,
    /// Whether the directory could be listed, for logging changes once.
    listability: Listability,
    /// The last collections, oldest first, for the status page's chart.
    history: Mutex<std::collections::VecDeque<ScrapePoint>>,
    /// The last encodings' sample lines, per format and filter.
    line_caches: Caches<(Format, Escaping, Option<NameFilter>), LineCache>,
    /// The last protobuf encodings' families, per escaping and filter.
    protobuf_caches: Caches<(Escaping, Option<NameFilter>), ProtobufCache>,
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
    served: Arc<ServedDir>,
    /// Where [`Endpoint::router`] serves the metrics.
    metrics_path: Arc<str>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("dir", &self.served.view.dir())
            .field("config", &self.served.config)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint for a directory's served view (a collector of its own,
    /// or a view shared with pushers, whose collector a maintainer's passes
    /// share). Touches nothing on disk: a maintainer in `config` is
    /// recovered and run by the host.
    #[must_use]
    pub fn new(view: impl Into<Arc<ServedView>>, config: EndpointConfig) -> Self {
        let mut config = config;
        config.max_concurrent_scrapes = config.max_concurrent_scrapes.max(1);
        Endpoint {
            served: Arc::new(ServedDir {
                view: view.into(),
                permits: Arc::new(Semaphore::new(config.max_concurrent_scrapes)),
                config,
                metrics: SelfMetrics::new(),
                #[cfg(test)]
                before_collect: None,
                logged_collection: AtomicU64::new(0),
                warm_collections: AtomicU64::new(0),
                shadowed_reported: Mutex::new(HashSet::new()),
                listability: Listability::default(),
                history: Mutex::new(std::collections::VecDeque::with_capacity(HISTORY)),
                line_caches: Mutex::new(Vec::new()),
                protobuf_caches: Mutex::new(Vec::new()),
                texts: Arc::new(TextPool::default()),
            }),
            metrics_path: Arc::from(DEFAULT_METRICS_PATH),
        }
    }

    /// Like [`Endpoint::new`], with a function run on the blocking pool
    /// before each collection (while holding its slot).
    #[cfg(test)]
    pub(crate) fn with_before_collect(
        collector: multiprom_collector::DirCollector,
        config: EndpointConfig,
        before_collect: BeforeCollect,
    ) -> Self {
        let mut endpoint = Endpoint::new(collector, config);
        if let Some(served) = Arc::get_mut(&mut endpoint.served) {
            served.before_collect = Some(before_collect);
        }
        endpoint
    }

    /// Collects the directory twice before the first request, blocking (run
    /// it off the async runtime's workers): the second collection sets the
    /// directory watch and maps the files, so the first request is a warm
    /// one, and a maintainer's first look at the processes after this
    /// answers for every file the collector has seen (its first scrape
    /// then already settles files and leaves live gauges out). Problems are
    /// logged as a scrape's are, once. A directory that cannot be read now
    /// is left for the scrapes to report.
    pub fn warm_up(&self) {
        for _ in 0..2 {
            if let Ok(scrape) = self.served.view.collector().collect() {
                for warning in &scrape.warnings {
                    tracing::warn!("{warning}");
                }
                let collection = scrape.stats.collection;
                self.served
                    .warm_collections
                    .store(collection, Ordering::Relaxed);
                self.served
                    .logged_collection
                    .fetch_max(collection, Ordering::Relaxed);
            }
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
        self.served.view.dir()
    }

    /// The configuration in force.
    #[must_use]
    pub fn config(&self) -> &EndpointConfig {
        &self.served.config
    }

    /// `GET|HEAD` on the metrics path (`/metrics` unless
    /// [`Endpoint::with_metrics_path`]), `/` (status page), `/-/healthy`
    /// and `/-/ready`; 405 for other methods on those paths, 404 elsewhere:
    /// a whole server's routes, as `multiprom serve` answers. In a host app
    /// that has its own `/` or fallback (axum refuses to merge two of
    /// either), merge [`Endpoint::metrics_router`] instead.
    pub fn router(&self) -> Router {
        let dir: Arc<Path> = Arc::from(self.dir());
        Router::new()
            .route(&self.metrics_path, get(metrics_handler))
            .route("/", get(status_handler))
            .route("/-/healthy", get(probes::healthy))
            .route("/-/ready", get(move || probes::ready(Arc::clone(&dir))))
            .fallback(not_found)
            .with_state(self.clone())
    }

    /// The metrics path alone (`GET|HEAD`, 405 for other methods), with no
    /// status page, probes or fallback: for a host app with routes of its
    /// own, which keeps its `/`, its 404s and its health checks.
    ///
    /// ```no_run
    /// # async fn host() -> std::io::Result<()> {
    /// use multiprom_collector::DirCollector;
    /// use multiprom_http::{Endpoint, EndpointConfig};
    ///
    /// let metrics = Endpoint::new(DirCollector::new("/run/metrics"), EndpointConfig::default());
    /// let app = axum::Router::new()
    ///     .route("/", axum::routing::get(|| async { "my app" }))
    ///     .merge(metrics.metrics_router())
    ///     .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "no such page") });
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    /// multiprom_http::serve(listener, app, Default::default(), std::future::pending()).await
    /// # }
    /// ```
    pub fn metrics_router(&self) -> Router {
        Router::new()
            .route(&self.metrics_path, get(metrics_handler))
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
        text: Text,
        filter: Option<NameFilter>,
    ) -> Result<String, ScrapeFailure> {
        let Text {
            format, escaping, ..
        } = text;
        let exemplars = if format.shows_exemplars() {
            Exemplars::Attach
        } else {
            Exemplars::Skip
        };
        self.rendered(
            filter,
            (Natives::Skip, exemplars),
            move |served, scrape, filter| match scrape {
                Some(scrape) => served.render_metrics(scrape, format, escaping, filter),
                None => {
                    let mut out = String::new();
                    format.encode_all(&[served.unlistable_families(filter)], escaping, &mut out);
                    out
                }
            },
        )
        .await
    }

    /// [`Endpoint::metrics`] in the Prometheus protobuf format
    /// (length-delimited `MetricFamily` messages), names escaped as
    /// `escaping` says.
    pub async fn metrics_protobuf(
        &self,
        escaping: Escaping,
        filter: Option<NameFilter>,
    ) -> Result<Vec<u8>, ScrapeFailure> {
        // The only format that shows native histograms: the only one that
        // reads their files.
        self.rendered(
            filter,
            (Natives::Merge, Exemplars::Attach),
            move |served, scrape, filter| {
                let mut out = Vec::new();
                match scrape {
                    Some(scrape) => {
                        out.reserve(64 * scrape.stats.series + 4096);
                        let own = served.own_families(scrape, filter);
                        // With the scrape's native histograms and the start
                        // time of each cumulative series.
                        let started = served.view.start_times(scrape, filter.is_none());
                        served.encode_protobuf(scrape, &started, escaping, filter, &mut out);
                        let none = NativeHistograms::default();
                        encode_protobuf(&own, &none, None, escaping, &mut out);
                    }
                    None => encode_protobuf(
                        &served.unlistable_families(filter),
                        &NativeHistograms::default(),
                        None,
                        escaping,
                        &mut out,
                    ),
                }
                out
            },
        )
        .await
    }

    /// One bounded collection rendered by `render` (given `None` when the
    /// directory cannot be listed; see [`Endpoint::metrics`]).
    async fn rendered<T, R>(
        &self,
        filter: Option<NameFilter>,
        shown: (Natives, Exemplars),
        render: R,
    ) -> Result<T, ScrapeFailure>
    where
        T: Send + 'static,
        R: Fn(&ServedDir, Option<&Arc<Scrape>>, Option<&NameFilter>) -> T + Send + Sync + 'static,
    {
        let render = Arc::new(render);
        let (kept, render_listed) = (filter.clone(), Arc::clone(&render));
        let result = self
            .bounded(filter.clone(), shown, move |served, scrape| {
                served.listability.listed(served.view.dir());
                render_listed(served, Some(scrape), kept.as_ref())
            })
            .await;
        match result {
            Err(ScrapeFailure::Collect(err)) => {
                self.served.metrics.count_scrape(ScrapeResult::Error);
                self.served.listability.failed(&err);
                Ok(render(&self.served, None, filter.as_ref()))
            }
            Err(failure) => {
                self.served.metrics.count_scrape(failure.result());
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
            // Its table shows each family's latest exemplar.
            .bounded(
                None,
                (Natives::Skip, Exemplars::Attach),
                move |served, scrape| {
                    let history = served.history_snapshot();
                    let maintenance = served.config.maintainer.as_ref().map(|m| m.status());
                    let siblings: Vec<String> = served
                        .config
                        .siblings
                        .iter()
                        .map(|s| s.status_line())
                        .collect();
                    let view = StatusView {
                        metrics_path: &metrics_path,
                        page,
                        history: &history,
                        maintenance: maintenance.as_ref(),
                        siblings: &siblings,
                    };
                    let liveness = served.config.maintainer.as_ref().map(|m| m.liveness());
                    render_status_page(served.view.dir(), scrape, view, |path| {
                        let Some(liveness) = liveness else {
                            return Writer::Unknown;
                        };
                        let held = multiprom_format::FileIdentity::of(path)
                            .ok()
                            .and_then(|id| liveness.holder(&id));
                        match held {
                            Some(pid) => Writer::Held(pid),
                            None if liveness.is_free_path(path) => Writer::Gone,
                            None => Writer::Unknown,
                        }
                    })
                },
            )
            .await;
        match result {
            Err(ScrapeFailure::Collect(err)) => {
                self.served.listability.failed(&err);
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

    async fn bounded<T: Send + 'static>(
        &self,
        filter: Option<NameFilter>,
        (natives, exemplars): (Natives, Exemplars),
        finish: impl FnOnce(&ServedDir, &Arc<Scrape>) -> T + Send + 'static,
    ) -> Result<T, ScrapeFailure> {
        let served = self.served.clone();
        let (queue_wait, timeout, limit) = (
            served.config.scrape_queue_wait,
            served.config.scrape_timeout,
            served.config.max_concurrent_scrapes,
        );
        let permit =
            match tokio::time::timeout(queue_wait, served.permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                // Timed out, or the semaphore was closed (it never is).
                _ => return Err(ScrapeFailure::Busy { limit }),
            };
        let task = tokio::task::spawn_blocking(move || {
            let _slot = permit;
            #[cfg(test)]
            if let Some(hook) = &served.before_collect {
                hook();
            }
            let scrape = served.view.collect(filter.as_ref(), natives, exemplars)?;
            // A collection shared by concurrent requests is reported once.
            let collection = scrape.stats.collection;
            if served
                .logged_collection
                .fetch_max(collection, Ordering::Relaxed)
                < collection
            {
                for warning in &scrape.warnings {
                    tracing::warn!("{warning}");
                }
                let number =
                    collection.saturating_sub(served.warm_collections.load(Ordering::Relaxed));
                crate::scrape_log::log_scrape(served.view.dir(), &scrape, number);
                served.remember(&scrape);
            }
            Ok::<T, CollectError>(finish(&served, &scrape))
        });
        match tokio::time::timeout(timeout, task).await {
            Err(_) => Err(ScrapeFailure::Timeout(timeout)),
            Ok(Err(join)) => Err(ScrapeFailure::Panicked(join.to_string())),
            Ok(Ok(result)) => Ok(result?),
        }
    }
}

impl ServedDir {
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

    /// What the maintainer has done, if there is one.
    fn maintenance(&self) -> Option<multiprom_maintain::MaintenanceStatus> {
        self.config.maintainer.as_ref().map(|m| m.status())
    }

    fn history_snapshot(&self) -> Vec<ScrapePoint> {
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .copied()
            .collect()
    }

    /// The `/metrics` families when the directory cannot be listed: the
    /// self-metrics alone, the last scrape's numbers at zero.
    fn unlistable_families(&self, filter: Option<&NameFilter>) -> Vec<MergedFamily> {
        let maintenance = self.maintenance();
        let mut own = self.metrics.record_nothing_read(maintenance.as_ref());
        own.push(directory_listable(false));
        own.extend(process_metrics::own());
        if let Some(filter) = filter {
            own = filter.restrict(own);
        }
        own
    }

    fn render_metrics(
        &self,
        scrape: &Arc<Scrape>,
        format: Format,
        escaping: Escaping,
        filter: Option<&NameFilter>,
    ) -> String {
        let mut out = self.texts.take(128 * scrape.stats.series + 4096);
        // The workers' families, then multiprom's own; OpenMetrics' one
        // `# EOF` comes after both, from `finish`.
        let mut body = ExpositionBody::new(format, escaping, &mut out);
        self.encode_families(scrape, format, escaping, filter, &mut body);
        let own = self.own_families(scrape, filter);
        body.families(&own);
        body.finish();
        out
    }

    /// multiprom's own families after a collection, as `filter` keeps them,
    /// without those a worker family's name shadows (logged once per name).
    fn own_families(&self, scrape: &Scrape, filter: Option<&NameFilter>) -> Vec<MergedFamily> {
        let maintenance = self.maintenance();
        let mut own = self.metrics.record(&scrape.stats, maintenance.as_ref());
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
        for sibling in &self.config.siblings {
            own.extend(sibling.families());
        }
        if let Some(filter) = filter {
            own = filter.restrict(own);
        }
        let reserved = reserved_names(&scrape.families);
        let (own, shadowed) = without_clashes(own, &reserved);
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
        own
    }
}

impl ServedDir {
    /// Appends the workers' families to `body` (written in `format`),
    /// through the line cache of this format and filter when no other scrape
    /// is using it (then afresh).
    fn encode_families(
        &self,
        scrape: &Arc<Scrape>,
        format: Format,
        escaping: Escaping,
        filter: Option<&NameFilter>,
        body: &mut ExpositionBody<'_>,
    ) {
        let Ok(mut caches) = self.line_caches.try_lock() else {
            body.families(&scrape.families);
            return;
        };
        let cache = cache_for(
            &mut caches,
            |(f, e, names)| *f == format && *e == escaping && names.as_ref() == filter,
            || (format, escaping, filter.cloned()),
        );
        body.cached(cache, Arc::clone(scrape));
    }

    /// Appends the workers' families with their native histograms in the
    /// protobuf format to `out`, through the protobuf cache of this filter
    /// when no other scrape is using it (then afresh).
    fn encode_protobuf(
        &self,
        scrape: &Arc<Scrape>,
        start_times: &StartTimes,
        escaping: Escaping,
        filter: Option<&NameFilter>,
        out: &mut Vec<u8>,
    ) {
        let Ok(mut caches) = self.protobuf_caches.try_lock() else {
            encode_protobuf(
                &scrape.families,
                &scrape.natives,
                Some(start_times),
                escaping,
                out,
            );
            return;
        };
        let cache = cache_for(
            &mut caches,
            |(e, names)| *e == escaping && names.as_ref() == filter,
            || (escaping, filter.cloned()),
        );
        let started = Some(start_times);
        cache.encode(Arc::clone(scrape), &scrape.natives, started, escaping, out);
    }
}

/// The cache in `caches` whose key `is` the one wanted, made for `key()`
/// (in place of the one made first, when there are [`CACHES`]) if there is
/// none: the key is copied only then.
fn cache_for<K, C: Default>(
    caches: &mut Vec<(K, C)>,
    is: impl Fn(&K) -> bool,
    key: impl FnOnce() -> K,
) -> &mut C {
    let at = match caches.iter().position(|(k, _)| is(k)) {
        Some(at) => at,
        None => {
            if caches.len() >= CACHES {
                caches.remove(0);
            }
            caches.push((key(), C::default()));
            caches.len() - 1
        }
    };
    &mut caches[at].1
}

/// Caches of one kind by what they are for, the first made first.
type Caches<K, C> = Mutex<Vec<(K, C)>>;

/// Caches kept of each kind, one per format and filter: Prometheus and a
/// person in both formats, and routers with a few fixed sets of names.
const CACHES: usize = 8;

/// `multiprom_directory_listable`: 1 when the last scrape could list the
/// directory, 0 when it could not (and served only the self-metrics).
fn directory_listable(listable: bool) -> multiprom_collector::MergedFamily {
    gauge(
        "multiprom_directory_listable",
        "1 if the last scrape could list the directory, 0 if it could not (then only multiprom's own metrics are served).",
        if listable { 1.0 } else { 0.0 },
    )
}

/// A list header's value: its lines joined with commas, as HTTP defines a
/// header sent on several lines (and `prometheus_client`'s servers read
/// it). A byte that is not ASCII (HTTP allows them in values) is read as a
/// replacement character, so a stray one in some parameter leaves the
/// rest of the header as meaningful as it was.
fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let mut lines = headers.get_all(name).iter();
    let mut text = String::from_utf8_lossy(lines.next()?.as_bytes()).into_owned();
    for line in lines {
        text.push(',');
        text.push_str(&String::from_utf8_lossy(line.as_bytes()));
    }
    Some(text)
}

async fn metrics_handler(
    State(endpoint): State<Endpoint>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let accept = header_text(&headers, header::ACCEPT);
    let accept = accept.as_deref();
    let not_acceptable = || {
        plain(
            StatusCode::NOT_ACCEPTABLE,
            format!(
                "multiprom: no acceptable format; /metrics serves \"{}\", \"{}\" and \"{}\"",
                Format::Prometheus.content_type(),
                Format::OpenMetrics.content_type(),
                PROTOBUF_CONTENT_TYPE
            ),
        )
    };
    let Some(exposition) = choose_exposition(accept) else {
        return not_acceptable();
    };
    let gzip = accepts_gzip(header_text(&headers, header::ACCEPT_ENCODING).as_deref());
    let filter = query.as_deref().and_then(name_filter);
    let (content_type, body) = match exposition {
        Exposition::Text(text) => match endpoint.metrics(text, filter).await {
            Ok(body) => (text.content_type(), Encoded::Text(body)),
            Err(failure) => return failure_response(&failure),
        },
        Exposition::Protobuf(protobuf) => {
            match endpoint.metrics_protobuf(protobuf.escaping, filter).await {
                Ok(bytes) => (protobuf.content_type(), Encoded::Binary(bytes)),
                Err(failure) => return failure_response(&failure),
            }
        }
        // An exposition this endpoint cannot serve yet.
        _ => return not_acceptable(),
    };
    // Which format a client got, for `--log.level debug`: negotiation is
    // otherwise invisible from the server's side.
    tracing::debug!(
        "GET {}: Accept {:?} answered with {content_type}{}",
        endpoint.metrics_path,
        accept.unwrap_or_default(),
        if gzip { ", gzipped" } else { "" }
    );
    let (bytes, encoding) = match gzip.then(|| gzip_bytes(body.as_bytes())) {
        Some(Ok(compressed)) => {
            // The text's buffer goes back to the pool right away.
            drop(body.into_bytes(&endpoint.served.texts));
            (Bytes::from(compressed), Some("gzip"))
        }
        _ => (body.into_bytes(&endpoint.served.texts), None),
    };
    let mut response = Response::new(Body::empty());
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
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

/// A `/metrics` body before it is sent: text (whose buffer returns to the
/// pool) or protobuf.
enum Encoded {
    Text(String),
    Binary(Vec<u8>),
}

impl Encoded {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Encoded::Text(text) => text.as_bytes(),
            Encoded::Binary(bytes) => bytes,
        }
    }

    fn into_bytes(self, texts: &Arc<TextPool>) -> Bytes {
        match self {
            Encoded::Text(text) => texts.body(text),
            Encoded::Binary(bytes) => Bytes::from(bytes),
        }
    }
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
