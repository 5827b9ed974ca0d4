//! `multiprom run`: start a command with `PROMETHEUS_MULTIPROC_DIR` set and
//! serve its merged metrics while it runs.
//!
//! The launcher stays out of the way: the command inherits stdin, stdout and
//! stderr; the signals that steer a server are passed on to it (see
//! `forward`); when it exits, multiprom exits with its status (128 + N if
//! signal N killed it). Every child that ends is reaped, not only the
//! command: as a container's first process (pid 1) multiprom inherits the
//! processes the command leaves behind, and an init that does not reap them
//! fills the process table with zombies (a worker among them would also
//! never count as gone, so its files would never be compacted).
//! Workers' `gauge_live*` files are reaped when their process is gone,
//! whoever started them (gunicorn's workers are the command's children, not
//! ours, so the pids in the file names are checked, not our children).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use multiprom_format::{DIR_ENV_VAR, LEGACY_DIR_ENV_VAR};
use rustix::process::{getpid, kill_process, waitpid, Pid, Signal, WaitOptions};
use tokio::signal::unix::{signal, SignalKind};

use crate::exit_code::ExitCode;
use crate::http_service::{self, EndpointArgs};
use crate::launch_dir::{ExistingFiles, Launch};
use crate::logging;

mod forward;

/// Arguments of `multiprom run`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  multiprom run -- gunicorn -w 4 app:app
  multiprom run --dir /run/app-metrics --listen 0.0.0.0:9478 -- python worker.py

Without --dir, an exported PROMETHEUS_MULTIPROC_DIR is used as it is (created if missing, its \
files kept at start and at the end, not compacted unless --compact: another reader may share \
it); without either, a fresh private directory is made under the temp dir and removed at the \
end. \
COMMAND gets PROMETHEUS_MULTIPROC_DIR; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, \
SIGWINCH, SIGTTIN and SIGTTOU are passed on to it \
(except those a terminal already sent it, as Ctrl-C); \
multiprom exits with its exit code (128+N if signal N killed it; 127 if it cannot be found, \
126 if it cannot be executed).")]
pub(crate) struct Args {
    /// Use this directory (created if missing) instead of $PROMETHEUS_MULTIPROC_DIR
    /// or a temporary one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Keep *.db files already in --dir (by default they are removed at
    /// start: stale files from an earlier run make wrong metrics).
    #[arg(long, requires = "dir")]
    pub keep_files: bool,
    /// Fold exited workers' files into *_compacted.db files (the default
    /// with --dir or a temporary directory: the workers are run's own
    /// descendants, so their processes are visible, and the directory is
    /// its own; not with an exported PROMETHEUS_MULTIPROC_DIR, which another
    /// reader may share).
    #[arg(long, overrides_with = "no_compact")]
    pub compact: bool,
    /// Keep every exited worker's files, as prometheus_client does.
    #[arg(long, overrides_with = "compact")]
    pub no_compact: bool,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub log: logging::LogArgs,
    /// The command to run, and its arguments.
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        num_args = 1..
    )]
    pub command: Vec<OsString>,
}

/// Exit status of the shell for a command that is not found.
const NOT_FOUND: u8 = 127;
/// Exit status of the shell for a command that cannot be executed.
const CANNOT_EXECUTE: u8 = 126;

/// Runs `multiprom run`.
pub(crate) fn main(args: Args) -> ExitCode {
    logging::init(&args.log);
    let (dir, existing, own) = directory(&args);
    // `--compact` and `--no-compact` override each other (the last wins).
    let compact = args.compact || (own && !args.no_compact);
    let pushes = match args.endpoint.push.configs() {
        Ok(pushes) => pushes,
        Err(err) => {
            eprintln!("multiprom run: {err}");
            return ExitCode::from(2);
        }
    };
    let prepared = Launch::prepare(
        "multiprom run",
        dir.as_deref(),
        existing,
        "multiprom-run-",
        (!args.endpoint.push.no_listen).then_some(args.endpoint.listen.as_str()),
    );
    let (launch, listener) = match prepared {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    let code = launch.runtime.block_on(supervise(
        &args,
        launch.dir.path(),
        listener,
        compact,
        pushes,
    ));
    launch.finish("multiprom run");
    ExitCode::from(code)
}

/// The directory to use, what to do with files already in it, and whether
/// it is `run`'s own: `--dir` (cleaned unless `--keep-files`), else an
/// exported `PROMETHEUS_MULTIPROC_DIR` (the application's own setting:
/// honoured, and as multiprom did not name it, nothing in it is removed
/// and, unless asked, nothing compacted: the application's own endpoint or
/// another collector may read it too), else none (a temporary one).
fn directory(args: &Args) -> (Option<PathBuf>, ExistingFiles, bool) {
    let exported = std::env::var_os(DIR_ENV_VAR).filter(|v| !v.is_empty());
    match (&args.dir, exported) {
        (Some(dir), exported) => {
            if let Some(exported) = exported.filter(|e| Path::new(e) != dir) {
                tracing::info!(
                    "--dir {} replaces the exported {DIR_ENV_VAR}={} for the command",
                    dir.display(),
                    Path::new(&exported).display()
                );
            }
            let existing = if args.keep_files {
                ExistingFiles::Keep
            } else {
                ExistingFiles::Remove
            };
            (Some(dir.clone()), existing, true)
        }
        (None, Some(exported)) => {
            tracing::info!(
                "using the exported {DIR_ENV_VAR}={} (files already there are kept{})",
                Path::new(&exported).display(),
                if args.compact {
                    ""
                } else {
                    "; not compacted, as another reader may share it: --compact to compact"
                }
            );
            (Some(PathBuf::from(exported)), ExistingFiles::Keep, false)
        }
        (None, None) => (None, ExistingFiles::Remove, true),
    }
}

/// Starts the command and the endpoint; returns the exit status to use.
async fn supervise(
    args: &Args,
    dir: &Path,
    listener: Option<std::net::TcpListener>,
    compact: bool,
    pushes: Vec<multiprom_push::PushConfig>,
) -> u8 {
    // Handlers first, so a signal right after the command starts is passed on.
    let mut signals = match forward::receive() {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("multiprom run: cannot handle signals: {err}");
            return 1;
        }
    };
    // Before the command starts, so its end is never missed.
    let mut child_ended = match signal(SignalKind::child()) {
        Ok(stream) => stream,
        Err(err) => {
            eprintln!("multiprom run: cannot handle signals: {err}");
            return 1;
        }
    };
    let (program, rest) = match args.command.split_first() {
        Some(split) => split,
        None => return 2, // clap requires COMMAND
    };
    // std's Command, not tokio's: the command is reaped below, with every
    // other child, and tokio's would try to reap it too.
    let mut command = std::process::Command::new(program);
    command
        .args(rest)
        .env(DIR_ENV_VAR, dir)
        .env_remove(LEGACY_DIR_ENV_VAR);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            let name = program.to_string_lossy();
            return if err.kind() == std::io::ErrorKind::NotFound {
                eprintln!("multiprom run: {name}: command not found");
                NOT_FOUND
            } else {
                eprintln!("multiprom run: {name}: cannot execute: {err}");
                CANNOT_EXECUTE
            };
        }
    };
    let pid = Pid::from_raw(child.id() as i32);

    let service = match http_service::service(dir, &args.endpoint, true, compact, pushes) {
        Ok(service) => service,
        Err(err) => {
            // Not reached: `configs` made each pusher's client before the
            // command started.
            eprintln!("multiprom run: {err}");
            return 2;
        }
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let endpoint_args = args.endpoint.clone();
    let server = tokio::spawn(async move {
        http_service::serve(listener, service, &endpoint_args, "serving", async {
            let _ = stop_rx.await;
        })
        .await
    });
    tracing::info!(
        "started {} (pid {}) with {DIR_ENV_VAR}={}",
        program.to_string_lossy(),
        pid.map_or(0, |p| p.as_raw_nonzero().get()),
        dir.display()
    );

    let pass_on = |received: forward::Received| {
        let Some(pid) = pid else { return };
        let name = forward::name(received.signal);
        match forward::action(received, pid) {
            forward::Action::PassOn => {
                tracing::info!("passing {name} on to pid {}", pid.as_raw_nonzero());
                if let Err(err) = kill_process(pid, received.signal) {
                    tracing::warn!("cannot pass {name} on: {err}");
                }
            }
            forward::Action::AlreadyThere => tracing::info!(
                "{name} from the terminal: pid {} got it too, not passing it on",
                pid.as_raw_nonzero()
            ),
            forward::Action::StopSelf => {
                tracing::debug!("{name} from the terminal: stopping, as the command does");
                let _ = kill_process(getpid(), Signal::STOP);
            }
        }
    };
    // The command is reaped only in `reap`, after which no signal is passed
    // on: a signal is never sent to a pid that could have been reused.
    let status = loop {
        if let Some(status) = reap(pid) {
            break status;
        }
        tokio::select! {
            _ = child_ended.recv() => {}
            Some(received) = signals.recv() => pass_on(received),
        }
    };
    drop(child);
    if let Ok(status) = &status {
        tracing::info!(
            "{} (pid {}) {}",
            program.to_string_lossy(),
            pid.map_or(0, |p| p.as_raw_nonzero().get()),
            describe_exit(*status)
        );
    }
    let _ = stop_tx.send(());
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!("serving failed: {err}"),
        Err(err) => tracing::warn!("serving failed: {err}"),
    }
    match status {
        Ok(status) => exit_code(status),
        Err(err) => {
            eprintln!("multiprom run: cannot wait for the command: {err}");
            1
        }
    }
}

/// Reaps every child that has ended; returns the command's status once it
/// has ended (`command`), or why it cannot be waited for. Any other child is
/// a process the command left behind that multiprom inherited as pid 1 (or
/// as a subreaper).
fn reap(command: Option<Pid>) -> Option<std::io::Result<ExitStatus>> {
    loop {
        match waitpid(None, WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => {
                let status = ExitStatus::from_raw(status.as_raw());
                if Some(pid) == command {
                    return Some(Ok(status));
                }
                tracing::debug!(
                    "reaped pid {}, left behind by the command: {}",
                    pid.as_raw_nonzero(),
                    describe_exit(status)
                );
            }
            Ok(None) => return None,
            Err(rustix::io::Errno::INTR) => continue,
            Err(err) => return Some(Err(err.into())),
        }
    }
}

/// "exited with status 3", "was killed by signal 9".
fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended: {status}"),
    }
}

/// The command's exit code, or 128 + N if signal N ended it (as shells do).
fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(1);
    }
    if let Some(sig) = status.signal() {
        return u8::try_from(128 + sig).unwrap_or(255);
    }
    1
}
