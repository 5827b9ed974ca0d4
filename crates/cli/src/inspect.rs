//! `multiprom inspect`: lands with its issue.

use std::process::ExitCode;

/// Arguments of `multiprom inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `multiprom inspect`.
pub fn main(_args: Args) -> ExitCode {
    eprintln!("multiprom inspect: not implemented yet");
    ExitCode::from(2)
}
