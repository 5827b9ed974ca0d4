//! Merge a `prometheus_client` multiprocess directory and expose it.
//!
//! Data flows one way: files → reader ([`multiprom_format`]) → merge →
//! [`exposition`] → bytes. [`DirCollector`] does the first three, keeping a
//! parse cache so an unchanged file is not parsed again; the encoders are pure
//! functions of [`MergedFamily`] values.
//!
//! The output equals Python's `MultiProcessCollector` + `generate_latest`
//! byte for byte: files are merged in the order the directory lists them, as
//! Python's `glob` returns them (see `docs/merge.md`). Unlike Python, a bad file never fails the
//! collection: it is skipped and reported in [`Scrape::warnings`] once per
//! state, with path, byte offset and reason.
//!
//! * [`DirCollector`]: a directory, collected again and again (incrementally).
//! * [`merge_files`]: given files, once (Python's `MultiProcessCollector.merge`).
//! * `RegistryCollector` (with the `prometheus-client` feature): a directory
//!   inside a Rust host's `prometheus_client::registry::Registry`.

mod collector;
pub mod exposition;
mod family;
mod filter;
mod intern;
mod keys;
mod native_dense;
mod native_histograms;
mod native_merge;
mod op;
mod parse;
mod plan;
mod problem;
#[cfg(feature = "prometheus-client")]
mod registry;
mod served;
mod settled_sums;
mod stamp;
mod start_times;
mod tracked;
mod watch;
mod writers;

pub use collector::{
    merge_files, CollectError, CollectOptions, DirCollector, Exemplars, FileReport, FileState,
    Natives, Scrape, ScrapeStats,
};
pub use exposition::{Escaping, Format};
pub use family::{FamilyType, LabelSet, MergedFamily, MergedSample};
pub use filter::NameFilter;
pub use native_histograms::NativeHistograms;
pub use problem::{Conflict, FamilyTypeName, Warning};
#[cfg(feature = "prometheus-client")]
pub use registry::RegistryCollector;
pub use served::{Served, ServedView};
pub use start_times::{restart_counting, StartTimes, START_TIMES_FILE};
// The listing `merge_files` takes; the rule lives with the file names.
pub use multiprom_format::scan_dir;
pub use writers::{WriterLiveness, WrittenFile};
