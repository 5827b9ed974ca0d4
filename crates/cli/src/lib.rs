//! `multiprom`: one Prometheus endpoint for many worker processes.
//!
//! The command line as a library: [`main_from`] is the whole CLI, called by
//! the `multiprom` binary (`src/main.rs`) and by the Python package's
//! `multiprom` command, which links it in (one build, one version, the same
//! behaviour). Each subcommand lives in its own module and returns the exit
//! code; errors are reported for people, as one line on stderr.

use std::ffi::OsString;
use std::io::Write;

use clap::{Parser, Subcommand};

use crate::exit_code::ExitCode;

mod demo;
mod dir_resolution;
mod docs;
mod exit_code;
mod http_service;
mod inspect;
mod launch_dir;
mod listen;
mod logging;
mod maintenance;
mod push_args;
mod relaunch;
mod run;
mod scrape;
mod serve;
mod signals;

/// One /metrics endpoint for many worker processes: reads and merges the
/// `*.db` files of prometheus_client's multiprocess mode.
#[derive(Debug, Parser)]
#[command(name = "multiprom", version = VERSION, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the merged metrics of a directory over HTTP.
    Serve(serve::Args),
    /// Print the merged metrics of a directory once.
    Scrape(scrape::Args),
    /// Run a command with PROMETHEUS_MULTIPROC_DIR set and serve its metrics.
    Run(run::Args),
    /// Show or check the contents of *.db files.
    Inspect(inspect::Args),
    /// Start demo workers that behave like an LLM inference server.
    Demo(demo::Args),
    /// Print a shell completion script.
    Completions(docs::CompletionsArgs),
    /// Print the man page (or write all of them with --dir).
    Man(docs::ManArgs),
}

pub use relaunch::Relaunch;

/// The version `multiprom --version` prints (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Runs the command line `args` (the program name first, as in
/// `std::env::args_os()`) and returns the status to exit with. `relaunch`
/// says how to start this CLI again (`demo` runs its workers so).
///
/// Standard output is flushed before it returns: the caller may end the
/// process without Rust's own exit path (the Python package does).
pub fn main_from<I, T>(args: I, relaunch: &Relaunch) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let code = dispatch(args, relaunch).code();
    let _ = std::io::stdout().flush();
    code
}

fn dispatch<I, T>(args: I, relaunch: &Relaunch) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // Usage errors exit 2 (clap's convention and the shell's); --help
            // and --version print to stdout and exit 0.
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Serve(args) => serve::main(args),
        Command::Scrape(args) => scrape::main(args),
        Command::Run(args) => run::main(args),
        Command::Inspect(args) => inspect::main(args),
        Command::Demo(args) => demo::main(args, relaunch),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
    }
}
