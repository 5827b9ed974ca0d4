//! How the CLI starts another copy of itself.

use std::ffi::OsString;

/// How to start this CLI again (`demo` runs each worker as
/// `... demo --worker N`). The binary is its own executable; inside the
/// Python interpreter the executable is Python's, so the Python package
/// says how (`python -m multiprom`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relaunch {
    /// The running executable (`std::env::current_exe`).
    CurrentExe,
    /// This program and these first arguments, then the subcommand's.
    Command(Vec<OsString>),
}

impl Relaunch {
    /// A command that runs the CLI with the arguments added to it after.
    pub(crate) fn command(&self) -> std::io::Result<tokio::process::Command> {
        match self {
            Relaunch::CurrentExe => Ok(tokio::process::Command::new(std::env::current_exe()?)),
            Relaunch::Command(words) => {
                let Some((program, first)) = words.split_first() else {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "no program to start the CLI with",
                    ));
                };
                let mut command = tokio::process::Command::new(program);
                command.args(first);
                Ok(command)
            }
        }
    }
}
