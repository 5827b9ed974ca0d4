//! `multiprom run`: lands with its issue.

use std::process::ExitCode;

/// Arguments of `multiprom run`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `multiprom run`.
pub fn main(_args: Args) -> ExitCode {
    eprintln!("multiprom run: not implemented yet");
    ExitCode::from(2)
}
