//! `multiprom serve`: lands with its issue.

use std::process::ExitCode;

/// Arguments of `multiprom serve`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `multiprom serve`.
pub fn main(_args: Args) -> ExitCode {
    eprintln!("multiprom serve: not implemented yet");
    ExitCode::from(2)
}
