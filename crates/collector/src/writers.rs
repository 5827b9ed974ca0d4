//! [`ExitedWriters`]: the caller's word on which files' writers are gone.

use std::fmt;
use std::sync::Arc;

use multiprom_format::FileName;

/// Tells whether the process that writes a file is gone for good (see
/// [`crate::DirCollector::settle_exited_writers`]).
#[derive(Clone)]
pub(crate) struct ExitedWriters(Arc<dyn Fn(&FileName) -> bool + Send + Sync>);

impl ExitedWriters {
    pub(crate) fn new(exited: impl Fn(&FileName) -> bool + Send + Sync + 'static) -> Self {
        ExitedWriters(Arc::new(exited))
    }

    /// Whether the writer of the file named `name` is gone.
    pub(crate) fn test(&self, name: &FileName) -> bool {
        (self.0)(name)
    }
}

impl fmt::Debug for ExitedWriters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExitedWriters")
    }
}
