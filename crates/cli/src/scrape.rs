//! `multiprom scrape`: lands with its issue.

use std::process::ExitCode;

/// Arguments of `multiprom scrape`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `multiprom scrape`.
pub fn main(_args: Args) -> ExitCode {
    eprintln!("multiprom scrape: not implemented yet");
    ExitCode::from(2)
}
