//! `multiprom demo`: the whole product in one command.
//!
//! Starts N worker processes that behave like an LLM inference server's
//! workers (written with `multiprom-client`, in prometheus_client's file
//! format), serves their merged metrics as `multiprom serve --reap-dead`
//! would, and restarts one worker now and then so that dead-worker handling
//! shows: the dead worker's `livesum`/`livemax` share disappears from the
//! gauges while its counters and histograms keep counting in the totals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use multiprom_format::{DIR_ENV_VAR, LEGACY_DIR_ENV_VAR};
use rustix::process::{kill_process, Pid, Signal};
use tokio::process::Child;

use crate::exit_code::ExitCode;
use crate::http_service::{self, parse_duration, EndpointArgs};
use crate::launch_dir::{ExistingFiles, Launch, MetricsDir};
use crate::logging;
use crate::signals;
use crate::Relaunch;

mod worker;

/// Arguments of `multiprom demo`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  multiprom demo
  multiprom demo --workers 8 --listen 127.0.0.1:9100
  multiprom demo --dir /tmp/demo-metrics   # then: multiprom inspect /tmp/demo-metrics

Without --dir the files go to a private temporary directory that is removed at the end; \
with --dir they are left there at the end. A --dir that already holds *.db files is refused \
unless --clean is given.")]
pub(crate) struct Args {
    /// Worker processes to start.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,
    /// Write the files here (created if missing) and leave them for `multiprom inspect`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Remove *.db files already in --dir (without it such a directory is
    /// refused: they may be another application's, and would mix with the
    /// demo's).
    #[arg(long, requires = "dir")]
    pub clean: bool,
    /// Kill and restart one worker this often (0s: never).
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = parse_duration)]
    pub restart_every: Duration,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub log: logging::LogArgs,
    /// Internal: run as demo worker N (started by the demo itself).
    #[arg(long, hide = true, value_name = "N")]
    pub worker: Option<u32>,
}

/// Runs `multiprom demo`.
pub(crate) fn main(args: Args, relaunch: &Relaunch) -> ExitCode {
    if let Some(index) = args.worker {
        return worker::main(index);
    }
    logging::init(&args.log);
    let pushes = match args.endpoint.push.configs() {
        Ok(pushes) => pushes,
        Err(err) => {
            eprintln!("multiprom demo: {err}");
            return ExitCode::from(2);
        }
    };
    let prepared = Launch::prepare(
        "multiprom demo",
        args.dir.as_deref(),
        if args.clean {
            ExistingFiles::Remove
        } else {
            ExistingFiles::Refuse { flag: "--clean" }
        },
        "multiprom-demo-",
        // The demo prints where to look: it always serves.
        Some(&args.endpoint.listen),
    );
    let (launch, listener) = match prepared {
        Ok((launch, Some(listener))) => (launch, listener),
        Ok((_, None)) => return ExitCode::FAILURE, // asked for one above
        Err(code) => return code,
    };
    let code = launch.runtime.block_on(supervise(
        &args,
        relaunch,
        launch.dir.path(),
        listener,
        pushes,
    ));
    let kept = matches!(launch.dir, MetricsDir::Given(_)).then(|| launch.dir.path().to_path_buf());
    launch.finish("multiprom demo");
    if let Some(kept) = kept {
        println!(
            "files left in {} (try: multiprom inspect {})",
            kept.display(),
            kept.display()
        );
    }
    code
}

/// "1 worker", "4 workers".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// One worker slot: its index and the running process.
struct Worker {
    index: u32,
    child: Child,
}

fn spawn_worker(index: u32, relaunch: &Relaunch, dir: &Path) -> std::io::Result<Worker> {
    let child = relaunch
        .command()?
        .args(["demo", "--worker", &index.to_string()])
        .env(DIR_ENV_VAR, dir)
        .env_remove(LEGACY_DIR_ENV_VAR)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    Ok(Worker { index, child })
}

/// Asks a worker to stop (SIGTERM), then insists (SIGKILL) after a second.
async fn stop_worker(worker: &mut Worker) {
    if let Some(pid) = worker.child.id().and_then(|id| Pid::from_raw(id as i32)) {
        let _ = kill_process(pid, Signal::TERM);
    }
    if tokio::time::timeout(Duration::from_secs(1), worker.child.wait())
        .await
        .is_err()
    {
        let _ = worker.child.kill().await;
    }
}

async fn supervise(
    args: &Args,
    relaunch: &Relaunch,
    dir: &Path,
    listener: std::net::TcpListener,
    pushes: Vec<multiprom_push::PushConfig>,
) -> ExitCode {
    let shutdown = match signals::termination() {
        Ok(shutdown) => shutdown,
        Err(err) => {
            eprintln!("multiprom demo: cannot handle signals: {err}");
            return ExitCode::FAILURE;
        }
    };
    tokio::pin!(shutdown);
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(err) => {
            eprintln!("multiprom demo: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut workers = Vec::new();
    for index in 0..args.workers {
        match spawn_worker(index, relaunch, dir) {
            Ok(worker) => workers.push(worker),
            Err(err) => {
                eprintln!("multiprom demo: cannot start worker {index}: {err}");
                for worker in &mut workers {
                    stop_worker(worker).await;
                }
                return ExitCode::FAILURE;
            }
        }
    }

    let service = match http_service::service(dir, &args.endpoint, true, false, pushes) {
        Ok(service) => service,
        Err(err) => {
            eprintln!("multiprom demo: {err}");
            return ExitCode::from(2);
        }
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let endpoint_args = args.endpoint.clone();
    let server = tokio::spawn(async move {
        http_service::serve(Some(listener), service, &endpoint_args, "serving", async {
            let _ = stop_rx.await;
        })
        .await
    });
    println!(
        "multiprom demo: {} writing to {}\n\
         \x20 metrics:  http://{addr}/metrics\n\
         \x20 status:   http://{addr}/\n\
         \x20 try:      curl -s http://{addr}/metrics | grep '^demo_'\n\
         \x20 Ctrl-C stops everything.",
        count(args.workers as usize, "worker"),
        dir.display()
    );

    let mut restarts = tokio::time::interval(if args.restart_every.is_zero() {
        Duration::from_secs(365 * 24 * 3600)
    } else {
        args.restart_every
    });
    restarts.tick().await; // the first tick is immediate
    let mut health = tokio::time::interval(Duration::from_millis(500));
    let mut next_restart = 0usize;
    let mut code = ExitCode::SUCCESS;
    loop {
        tokio::select! {
            signal = &mut shutdown => {
                tracing::info!("{signal}: stopping {}", count(workers.len(), "worker"));
                break;
            }
            _ = restarts.tick(), if !args.restart_every.is_zero() => {
                let slot = next_restart % workers.len();
                let worker = &mut workers[slot];
                next_restart += 1;
                let old = worker.child.id().unwrap_or(0);
                stop_worker(worker).await;
                match spawn_worker(worker.index, relaunch, dir) {
                    Ok(new) => {
                        tracing::info!(
                            "restarted worker {} (pid {old} -> {}): its live gauges are reaped, its counters stay in the totals",
                            worker.index,
                            new.child.id().unwrap_or(0)
                        );
                        *worker = new;
                    }
                    Err(err) => {
                        eprintln!("multiprom demo: cannot restart worker {}: {err}", worker.index);
                        code = ExitCode::FAILURE;
                        break;
                    }
                }
            }
            _ = health.tick() => {
                // A worker that died on its own (it cannot use the directory,
                // say) ends the demo rather than restarting in a loop.
                if let Some((index, status)) = workers.iter_mut().find_map(|w| {
                    w.child.try_wait().ok().flatten().map(|status| (w.index, status))
                }) {
                    eprintln!("multiprom demo: worker {index} exited on its own ({status})");
                    code = ExitCode::FAILURE;
                    break;
                }
            }
        }
    }
    for worker in &mut workers {
        stop_worker(worker).await;
    }
    let _ = stop_tx.send(());
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!("serving failed: {err}"),
        Err(err) => tracing::warn!("serving failed: {err}"),
    }
    code
}
