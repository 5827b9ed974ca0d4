//! `multiprom demo`: lands with its issue.

use std::process::ExitCode;

/// Arguments of `multiprom demo`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `multiprom demo`.
pub fn main(_args: Args) -> ExitCode {
    eprintln!("multiprom demo: not implemented yet");
    ExitCode::from(2)
}
