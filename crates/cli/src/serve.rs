//! `multiprom serve`: one HTTP endpoint for a multiprocess directory.

use std::path::PathBuf;

use crate::exit_code::ExitCode;
use crate::http_service::{self, EndpointArgs};
use crate::{dir_resolution, listen, logging, signals};

/// Arguments of `multiprom serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Serves GET /metrics (Prometheus text 0.0.4, or OpenMetrics 1.0.0 or the Prometheus protobuf \
format when the Accept header prefers it; gzip when allowed), GET / (a status page of the \
directory's files), and GET /-/healthy and /-/ready. \
Logs go to stderr (--log.level debug explains every scrape). SIGINT/SIGTERM stop it gracefully.")]
pub(crate) struct Args {
    /// The multiprocess directory (default: $PROMETHEUS_MULTIPROC_DIR).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub log: logging::LogArgs,
    /// Leave out, then remove, the gauge_live* files whose writer is gone (as
    /// prometheus_client's mark_process_dead does): no process holds them
    /// for writing, whatever their name. Where that cannot be seen
    /// (liveness unknown, said in the log), nothing is left out.
    #[arg(long)]
    pub reap_dead: bool,
    /// Fold the counter, histogram, summary and gauge sum/max/min/mostrecent
    /// files of exited workers into one *_compacted.db file per kind, at
    /// start and every --compact-interval, so the directory stays small
    /// under worker churn. Nothing is folded while the writers' liveness is
    /// unknown. Python's own collector reading the same
    /// directory may miscount during a fold: read it through multiprom.
    #[arg(long)]
    pub compact: bool,
}

/// Runs `multiprom serve`: exit 0 after SIGINT/SIGTERM, 2 for a bad
/// directory or listen address, 1 if serving fails.
pub(crate) fn main(args: Args) -> ExitCode {
    logging::init(&args.log);
    let dir = match dir_resolution::resolve(args.dir) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("multiprom serve: {err}");
            return ExitCode::from(2);
        }
    };
    let pushes = match args.endpoint.push.configs() {
        Ok(pushes) => pushes,
        Err(err) => {
            eprintln!("multiprom serve: {err}");
            return ExitCode::from(2);
        }
    };
    let listener = match listen::bind_unless(args.endpoint.push.no_listen, &args.endpoint.listen) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("multiprom serve: {err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match http_service::runtime() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("multiprom serve: cannot start: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let stop = signals::termination()?;
        let service =
            http_service::service(&dir, &args.endpoint, args.reap_dead, args.compact, pushes)
                .map_err(std::io::Error::other)?;
        http_service::serve(listener, service, &args.endpoint, "serving", async {
            let signal = stop.await;
            tracing::info!("{signal}: shutting down");
        })
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("multiprom serve: {err}");
            ExitCode::FAILURE
        }
    }
}
