//! The status a subcommand ends with.

/// A subcommand's exit status. Not `std::process::ExitCode`: that one cannot
/// be read back, and the Python package needs the number to end the
/// interpreter with the status the binary would have ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitCode(u8);

impl ExitCode {
    /// Status 0.
    pub(crate) const SUCCESS: ExitCode = ExitCode(0);
    /// Status 1.
    pub(crate) const FAILURE: ExitCode = ExitCode(1);

    /// The number, as the process exits with it.
    pub(crate) fn code(self) -> u8 {
        self.0
    }
}

impl From<u8> for ExitCode {
    fn from(code: u8) -> Self {
        ExitCode(code)
    }
}
