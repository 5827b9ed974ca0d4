//! `multiprom`: one Prometheus endpoint for many worker processes.
//!
//! Each subcommand lives in its own module and returns the process exit code;
//! errors are reported here for people, as one line on stderr.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;
mod dir_resolution;
mod docs;
mod http_service;
mod inspect;
mod launch_dir;
mod listen;
mod logging;
mod maintenance;
mod run;
mod scrape;
mod serve;
mod signals;

/// One /metrics endpoint for many worker processes: reads and merges the
/// `*.db` files of prometheus_client's multiprocess mode.
#[derive(Debug, Parser)]
#[command(name = "multiprom", version, about, long_about = None, propagate_version = true)]
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
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
        Command::Demo(args) => demo::main(args),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
    }
}
