//! The `multiprom` binary: the CLI of this crate's library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let relaunch = multiprom_cli::Relaunch::CurrentExe;
    ExitCode::from(multiprom_cli::main_from(std::env::args_os(), &relaunch))
}
