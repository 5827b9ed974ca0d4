//! The HTTP service `serve`, `run` and `demo` start: the endpoint's flags,
//! the collector, maintainer and endpoint they make, and serving until told
//! to stop.

use std::future::Future;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use multiprom_collector::{DirCollector, ServedView};
use multiprom_http::{Endpoint, EndpointConfig, ServerConfig};
use multiprom_maintain::{CompactConfig, MaintainConfig, Maintainer, ReapConfig};
use multiprom_push::{PushConfig, PushSetupError, Pusher};

use crate::listen::DEFAULT_LISTEN;
use crate::maintenance;
use crate::push_args::{self, PushArgs};

/// Flags of the HTTP endpoint.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EndpointArgs {
    /// Address to serve on, HOST:PORT (e.g. 0.0.0.0:9478, [::1]:9478, :9478 for
    /// every IPv4 interface; port 0 picks a free port, logged at start).
    // The text is the flag's help, where `[::1]` is an address, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_name = "HOST:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// A scrape that takes longer than this answers 503 (e.g. 10s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub scrape_timeout: Duration,
    /// Path of the metrics (/ is the status page, /-/healthy and /-/ready
    /// the health checks).
    #[arg(long = "web.telemetry-path", value_name = "PATH", default_value = multiprom_http::DEFAULT_METRICS_PATH, value_parser = parse_metrics_path)]
    pub telemetry_path: String,
    /// Scrapes collected at once; more wait briefly, then get 503.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_concurrent_scrapes: usize,
    /// How long a scrape waits for a free slot before 503.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub scrape_queue_wait: Duration,
    /// Connections whose request headers take longer are closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// Connections whose client leaves a response unread this long in all
    /// (stopped reading) are closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Connections open at once. One arriving at the limit is let in by
    /// closing those waiting longest for a request (idle, or still sending
    /// headers), else one that left a response unread; reaching the limit
    /// is logged.
    #[arg(long, value_name = "N", default_value_t = multiprom_http::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// With reaping on: how long a worker must have exited before its
    /// gauge_live* files are removed (they leave the output at once). Long
    /// enough for any child_exit hook calling mark_process_dead to finish
    /// first (e.g. 5m, 30s).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub reap_grace: Duration,
    /// How often exited processes' live-gauge files past their grace period
    /// are removed (every scrape leaves them out of its answer at once).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub reap_interval: Duration,
    /// With compaction on: how often exited workers' files are folded
    /// (e.g. 30s, 5m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_nonzero_duration)]
    pub compact_interval: Duration,
    /// Also serve CPU, resident memory and start time of every live process
    /// writing to the directory (multiprom_worker_process_*{pid}, read from
    /// /proc; the pid label joins the workers' liveall/all gauges). Only
    /// where the workers' pids are visible (same pid namespace).
    #[arg(long)]
    pub worker_process_metrics: bool,
    #[command(flatten)]
    pub push: PushArgs,
}

fn parse_metrics_path(text: &str) -> Result<String, multiprom_http::MetricsPathError> {
    multiprom_http::valid_metrics_path(text).map(|()| text.to_owned())
}

/// Parses `250ms`, `10s`, `1.5s`, `2m`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let err = || format!("{text:?} is not a duration (e.g. 500ms, 10s, 2m)");
    let (number, unit) = text
        .find(|c: char| c.is_ascii_alphabetic())
        .map_or((text, ""), |i| text.split_at(i));
    let number: f64 = number.trim().parse().map_err(|_| err())?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "s" => number,
        "m" => number * 60.0,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| err())
}

/// [`parse_duration`], refusing zero: an interval of 0 would run its task
/// in a loop.
fn parse_nonzero_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err(format!("{text:?} is no interval: it must be more than 0")),
        duration => Ok(duration),
    }
}

/// What serving a directory is made of: one collector, read by the served
/// view and by the maintainer's compaction passes, which must not
/// interleave with its collections; the maintainer; the served view, read
/// by the endpoint and the pushers as siblings.
pub(crate) struct Service {
    collector: Arc<DirCollector>,
    maintainer: Arc<Maintainer>,
    endpoint: Endpoint,
    pushers: Vec<Pusher>,
}

/// The service for `dir` as the flags say (its maintainer is recovered and
/// run by [`serve`]): it always watches which writers are gone (files no
/// process holds are then read no more), and reaps and compacts when
/// asked; it pushes as `pushes` say (see [`PushArgs::configs`]).
pub(crate) fn service(
    dir: &Path,
    args: &EndpointArgs,
    reap_dead: bool,
    compact: bool,
    pushes: Vec<PushConfig>,
) -> Result<Service, PushSetupError> {
    let mut config = EndpointConfig::default()
        .with_max_concurrent_scrapes(args.max_concurrent_scrapes)
        .with_scrape_queue_wait(args.scrape_queue_wait)
        .with_scrape_timeout(args.scrape_timeout)
        .with_worker_process_metrics(args.worker_process_metrics);
    let mut maintain = MaintainConfig::new();
    if reap_dead {
        maintain = maintain.reap(
            ReapConfig::default()
                .with_grace(args.reap_grace)
                .with_interval(args.reap_interval),
        );
    }
    if compact {
        maintain = maintain.compact(CompactConfig::default().with_interval(args.compact_interval));
    }
    let maintainer = Arc::new(Maintainer::new(dir, maintain));
    let collector = Arc::new(maintainer.govern(DirCollector::new(dir)));
    let view = Arc::new(ServedView::new(Arc::clone(&collector)));
    let pushers = pushes
        .into_iter()
        .map(|push| Pusher::new(Arc::clone(&view), push))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(report) = push_args::report(&pushers) {
        config = config.with_sibling(report);
    }
    let endpoint = Endpoint::new(view, config.with_maintainer(Arc::clone(&maintainer)))
        .with_metrics_path(&args.telemetry_path);
    Ok(Service {
        collector,
        maintainer,
        endpoint,
        pushers,
    })
}

/// Serves `service` on `listener` (none: push only) until `shutdown`
/// completes, then pushes once more. Logs the one start line (with the real
/// address, so port 0 can be used); recovers the directory and makes the
/// maintainer's first pass before the first request is answered, then
/// runs it on its schedule.
pub(crate) async fn serve(
    listener: Option<TcpListener>,
    service: Service,
    args: &EndpointArgs,
    what: &str,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    raise_open_file_limit();
    let listener = listener
        .map(tokio::net::TcpListener::from_std)
        .transpose()?;
    let Service {
        collector,
        maintainer,
        endpoint,
        pushers,
    } = service;
    let at = match &listener {
        Some(listener) => {
            let addr = listener.local_addr()?;
            format!(
                "at http://{addr}{} (status page http://{addr}/)",
                endpoint.metrics_path()
            )
        }
        None => "with no HTTP endpoint".to_owned(),
    };
    let pushing: String = pushers
        .iter()
        .map(|p| {
            let report = p.report();
            format!(", pushing by {} to {}", report.protocol, report.receiver)
        })
        .collect();
    tracing::info!(
        "{what} {} {at}{pushing}{}",
        endpoint.dir().display(),
        if maintainer.reaps() {
            ", leaving exited processes' live gauges out and removing their files after the grace period"
        } else {
            ""
        }
    );
    let warm_up = {
        let endpoint = endpoint.clone();
        move || endpoint.warm_up()
    };
    let maintenance = maintenance::start(maintainer, collector, warm_up).await?;
    // Each pusher runs until told to stop, then pushes once more: after the
    // endpoint stops (for `run`: after the command has exited), so the last
    // totals arrive.
    let (stop_pushing, pushing_stopped) = tokio::sync::watch::channel(false);
    let pushers: Vec<_> = pushers
        .into_iter()
        .map(|pusher| {
            let mut stopped = pushing_stopped.clone();
            tokio::spawn(pusher.run(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            }))
        })
        .collect();
    let result = match listener {
        Some(listener) => {
            let config = ServerConfig::default()
                .with_header_read_timeout(args.header_read_timeout)
                .with_write_timeout(args.write_timeout)
                .with_max_connections(args.max_connections);
            multiprom_http::serve(listener, endpoint.router(), config, shutdown).await
        }
        None => {
            shutdown.await;
            Ok(())
        }
    };
    let _ = stop_pushing.send(true);
    for pusher in pushers {
        let _ = pusher.await;
    }
    maintenance.abort();
    result
}

/// A multi-threaded runtime with two workers: the scrape work itself runs
/// on the blocking pool.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("multiprom")
        .enable_all()
        .build()
}

/// Raises the soft limit of open files to the hard one: the maintainer's
/// liveness keeps each `*.db` file of the directory open (read-only) to ask
/// the kernel about its writers, and a directory of thousands of files is
/// past the usual soft limit of 1,024. Where it cannot, the files past it
/// are asked about through `/proc` instead.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!("cannot raise the open file limit: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1h").is_err());
    }
}
