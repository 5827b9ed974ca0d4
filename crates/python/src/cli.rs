//! The `multiprom` command of the Python package: the wheel's console
//! script and `python -m multiprom` (`python/multiprom/__main__.py`) run
//! the Rust CLI here, in the interpreter's process, so that the command
//! and the binary are one build of one version.

use std::ffi::OsString;
use std::panic::{catch_unwind, AssertUnwindSafe};

use multiprom_cli::Relaunch;
use pyo3::prelude::*;

/// The status a Rust program exits with when its main thread panics.
const PANICKED: u8 = 101;

/// Runs `multiprom ARGS...` and returns the status to exit with. `relaunch`
/// is how to start the command again (`[sys.executable, "-m",
/// "multiprom"]`): `demo` starts its workers so.
///
/// The GIL is released for the whole run: the CLI never calls into Python,
/// and a Python thread, if any, keeps running. A panic becomes the status
/// the binary would exit with (the panic message is printed by Rust's
/// hook), not a Python exception.
#[pyfunction]
pub(crate) fn main(py: Python<'_>, args: Vec<OsString>, relaunch: Vec<OsString>) -> u8 {
    // The program name clap shows in usage and errors, as the binary's.
    let argv: Vec<OsString> = std::iter::once(OsString::from("multiprom"))
        .chain(args)
        .collect();
    let relaunch = Relaunch::Command(relaunch);
    py.detach(|| {
        catch_unwind(AssertUnwindSafe(|| {
            multiprom_cli::main_from(argv, &relaunch)
        }))
        .unwrap_or(PANICKED)
    })
}
