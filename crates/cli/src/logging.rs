//! Logs for the long-running commands (`serve`, `run`): tracing to stderr,
//! filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the stderr logger. Colours only on a terminal. A bad `RUST_LOG`
/// is reported and the default used, rather than failing the command.
pub fn init() {
    let filter = match EnvFilter::try_from_default_env() {
        Ok(filter) => filter,
        Err(err) => {
            if std::env::var_os(EnvFilter::DEFAULT_ENV).is_some() {
                eprintln!("multiprom: warning: ignoring RUST_LOG: {err}");
            }
            EnvFilter::new("info")
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
