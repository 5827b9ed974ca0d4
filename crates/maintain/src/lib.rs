//! What multiprom does *to* a multiprocess metrics directory, beside
//! reading it: no web server, no async runtime, for any host (the
//! `multiprom` binary, an application of its own, a test).
//!
//! * [`Liveness`]: the one rule for "this file's writer is gone": no
//!   process has the file open or mapped for writing, as walks of `/proc`
//!   show; unknown (nothing is gone) where holders cannot be seen.
//!   Settling, leaving live gauges out, reaping and compaction all ask it.
//! * [`Maintainer`]: the one owner of the schedule. It walks for its
//!   [`Liveness`], reaps (what
//!   `prometheus_client.multiprocess.mark_process_dead` does, for every
//!   writer that is gone, without ever racing the application's own call)
//!   and compacts (folds exited workers' files into one file per kind,
//!   crash-safely, so a directory stays bounded under worker churn), as its
//!   [`MaintainConfig`] says. Collections settle files and leave live
//!   gauges out by its liveness ([`Maintainer::liveness`]), and read what
//!   it has done ([`Maintainer::status`]).
//!   A `*.db` file's companions (its exemplar file, its native histogram
//!   file) go where it goes: removed with it, folded with it (native
//!   histograms exactly once, under the same journal as the values), and
//!   removed as orphans once it and its process are gone.
//! * [`clear_stale`]: a directory made ready for a new run (`multiprom run
//!   --dir`): an earlier run's files removed, none a process still uses.
//! * [`process_state`], [`is_gone`]: whether a process of a given pid
//!   exists, as this pid namespace sees it (never proof that a file's
//!   writer is gone: the number in a file's name need not be its writer's
//!   pid).
//!
//! ```no_run
//! use multiprom_collector::DirCollector;
//! use multiprom_maintain::{CompactConfig, MaintainConfig, Maintainer};
//!
//! let collector = DirCollector::new("/run/metrics");
//! let maintainer = Maintainer::new(
//!     "/run/metrics",
//!     MaintainConfig::new().compact(CompactConfig::default()),
//! );
//! maintainer.recover(&collector);
//! if let Some(Ok(pass)) = maintainer.compact_now(&collector) {
//!     println!("folded {} files", pass.files_folded());
//! }
//! ```

mod compaction;
mod companion;
mod config;
mod liveness;
mod maintainer;
mod proc_stat;
mod process;
mod reap;
mod set_aside;
mod stale;
mod status;

pub use compaction::{CompactError, CompactPass, JournalError};
pub use config::{CompactConfig, MaintainConfig, ReapConfig};
pub use liveness::{Liveness, LivenessState, UnknownLiveness};
pub use maintainer::Maintainer;
pub use proc_stat::ProcStat;
pub use process::{is_gone, process_state, ProcessState};
pub use stale::{clear_stale, ClearError, Cleared};
pub use status::{CompactionStatus, MaintenanceStatus};
