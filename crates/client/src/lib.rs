//! Write Prometheus metrics from Rust worker processes into a
//! `prometheus_client` multiprocess directory, exactly as Python workers do.
//!
//! Rust and Python workers can share one `PROMETHEUS_MULTIPROC_DIR`: the
//! files, entry keys and values are the ones Python would write for the same
//! metric definitions (byte for byte), so Python's `MultiProcessCollector`
//! and multiprom's collector read them as their own. An update is a
//! lock-free atomic add or store on the memory-mapped file; nothing is
//! locked, allocated or written with a system call.
//!
//! ```
//! use multiprom_client::{GaugeMode, MultiprocessRegistry, DEFAULT_BUCKETS};
//!
//! # let dir = tempfile::tempdir()?;
//! # std::env::set_var("PROMETHEUS_MULTIPROC_DIR", dir.path());
//! let registry = MultiprocessRegistry::from_env()?; // PROMETHEUS_MULTIPROC_DIR
//!
//! // A labelled family; keep the child handle for hot paths.
//! let requests = registry.counter_family("requests_total", "Requests served", &["status"])?;
//! let ok = requests.labels(&["200"])?;
//! ok.inc();
//! ok.inc_by(2.0)?;
//! assert!(ok.inc_by(-1.0).is_err(), "counters only go up");
//!
//! let running = registry.gauge("running_requests", "Requests in flight", GaugeMode::LiveSum)?;
//! {
//!     let _in_flight = running.track_inprogress(); // +1 now, -1 at the end of the scope
//!     assert_eq!(running.get(), 1.0);
//! }
//! let latency = registry.histogram("latency_seconds", "Request latency", &DEFAULT_BUCKETS)?;
//! latency.observe(0.2);
//!
//! // The files are Python's: counter_<pid>.db, gauge_livesum_<pid>.db, histogram_<pid>.db.
//! let pid = std::process::id();
//! let file = registry.dir().join(format!("counter_{pid}.db"));
//! let entries = multiprom_format::read_file(&file)?.entries;
//! assert_eq!(entries[0].raw_key, r#"["requests", "requests_total", {"status": "200"}, "Requests served"]"#);
//! assert_eq!(entries[0].value, 3.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Metric types and entries
//!
//! As in Python's `metrics.py`/`values.py`, a child's entries are created at
//! 0 when the child is created (a plain metric at registration, a family's
//! child on its first [`Family::labels`] call), in Python's order:
//!
//! | type | entries | notes |
//! |---|---|---|
//! | [`Counter`] | `<name>_total` | a trailing `_total` is stripped from the registered name |
//! | [`Gauge`], [`MostRecentGauge`] | `<name>` | file `gauge_<mode>_<id>.db` |
//! | [`Summary`] | `<name>_count`, `<name>_sum` | |
//! | [`Histogram`] | `<name>_sum`, `<name>_bucket` per bound | per-bucket counts, no `_count` |
//! | [`NativeHistogram`] | as [`Histogram`]; native-only: `<name>_sum`, `<name>_bucket{le="+Inf"}` | and a native series, below |
//!
//! Gauges in the `mostrecent` and `livemostrecent` modes are
//! [`MostRecentGauge`]s: they have `set` only (Python raises on `inc`/`dec`)
//! and every `set` stores the wall-clock time, which the merge uses.
//!
//! # Native histograms
//!
//! [`MultiprocessRegistry::native_histogram`] and
//! [`MultiprocessRegistry::native_histogram_family`] make
//! [`NativeHistogram`]s: Prometheus's sparse exponential buckets
//! ([`NativeHistogramOptions`]: schema 3, at most 160 buckets, the zero
//! bucket width of client_golang, no classic buckets by default). Each
//! observation goes into the process's `histogram_<id>.db` as a
//! [`Histogram`] with the options' classic buckets would write it (a
//! native-only histogram has the single bucket `le="+Inf"`: Python's
//! collector and the text formats show its count and sum), and into the
//! companion file `native-histograms/histogram_<id>.native` (layout:
//! [`multiprom_format::native_file`]) that Python never opens and
//! multiprom's collector merges. The options are checked as Prometheus
//! would take them ([`ClientError::InvalidNativeOptions`]); names and
//! labels as a histogram's (`le` is refused).
//!
//! Creating a native histogram or a child returns the failure to create
//! its native file as any creating call returns the failure to create its
//! `*.db` file (the rule of this crate: failures come from the creating
//! call); nothing is written to the `*.db` file then. A metric that
//! cannot record natively is refused rather than quietly made
//! classic-only, since the application asked for native buckets and can
//! fall back to [`MultiprocessRegistry::histogram`] itself. Observations
//! never fail: a native file that has reached its size limit keeps
//! counting each observation in the nearest bucket it has, and a forked
//! child that cannot create its own native file drops its native
//! observations (printed once) while its classic part is still counted.
//! After `fork()` a child records natively into its own file, as its
//! values go into its own `*.db` files: it is made, holding every native
//! series this process had (empty), on the child's first native
//! observation or by [`MultiprocessRegistry::reopen_after_fork`].
//!
//! # Exemplars
//!
//! [`Counter::inc_with_exemplar`] and [`Histogram::observe_with_exemplar`]
//! attach an exemplar (the labels of, say, the trace behind an update) as
//! `prometheus_client`'s `inc(amount, exemplar)` and
//! `observe(amount, exemplar)` do: the labels, the amount and the current
//! time, on the counter's `_total` entry or on the bucket the observation
//! fell in. A series keeps its latest exemplar. Labels are checked as
//! Python checks them (label names, at most 128 code points in names and
//! values together); a refused exemplar is a [`ClientError`], and the amount
//! is counted all the same.
//!
//! Python keeps exemplars in memory only, and not at all in multiprocess
//! mode. Here they go into companion files that Python never opens,
//! `exemplars/<kind>_<id>.exemplars` beside `<kind>_<id>.db` (layout:
//! [`multiprom_format::exemplar_file`]), keyed by the `*.db` entry's key;
//! multiprom's collector reads them. The file (and the `exemplars`
//! directory) is created on the first exemplar, so a process that never
//! records one leaves none behind. A series' first exemplar takes the
//! registry's lock to find its record; later ones are lock-free stores, as
//! value updates are. Storing an exemplar never fails the update: if the
//! exemplar file cannot be created or grown, exemplars are dropped, the
//! values are counted, and the failure is printed once on stderr. After
//! `fork()` the child stores its exemplars in its own file, never the
//! parent's.
//!
//! ```
//! use multiprom_client::MultiprocessRegistry;
//! use multiprom_format::{exemplar_file::exemplar_path, fork::run_in_forked_child, read_exemplar_file, read_file};
//!
//! let dir = tempfile::tempdir()?;
//! let registry = MultiprocessRegistry::new(dir.path())?;
//! let jobs = registry.counter("jobs", "Jobs done")?;
//! jobs.inc_with_exemplar(2.0, &[("trace_id", "4bf92f35")])?;
//!
//! let exemplars = |pid: u32| {
//!     let name: multiprom_format::FileName = format!("counter_{pid}.db").parse()?;
//!     let entries = read_file(&dir.path().join(name.to_string()))?.entries;
//!     let exemplars = read_exemplar_file(&exemplar_path(dir.path(), &name))?.entries;
//!     Ok::<_, Box<dyn std::error::Error>>((entries, exemplars))
//! };
//! let (entries, stored) = exemplars(std::process::id())?;
//! assert_eq!(stored[0].raw_key, entries[0].raw_key, "on jobs_total");
//! let exemplar = &stored[0].exemplar;
//! assert_eq!(exemplar.labels, [("trace_id".to_string(), "4bf92f35".to_string())]);
//! assert_eq!(exemplar.value, 2.0);
//!
//! // A forked child's exemplar goes into its own file.
//! let child = run_in_forked_child(|| {
//!     let stored = jobs.inc_with_exemplar(1.0, &[("trace_id", "child")]).is_ok();
//!     i32::from(!stored)
//! })?;
//! assert!(child.success(), "{child:?}");
//! let (_, in_child) = exemplars(child.pid)?;
//! assert_eq!(in_child[0].exemplar.labels[0].1, "child");
//! let (_, in_parent) = exemplars(std::process::id())?;
//! assert_eq!(in_parent[0].exemplar.labels[0].1, "4bf92f35", "parent's file untouched");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Names and validation
//!
//! Metric names must match `[a-zA-Z_:][a-zA-Z0-9_:]*` and label names
//! `[a-zA-Z_][a-zA-Z0-9_]*` (Prometheus' classic rules; the UTF-8 names that
//! `prometheus_client` 0.26 accepts by default are refused). Label names
//! starting with `__` are refused, and so are `le` on histograms, `quantile`
//! on summaries and `pid` on gauges (the collector overwrites or drops a
//! gauge's `pid` label). Every refusal is a [`ClientError`] variant.
//!
//! # Directory and process identifier
//!
//! Files go into the directory from `PROMETHEUS_MULTIPROC_DIR` (or the legacy
//! `prometheus_multiproc_dir`), or the one given to
//! [`RegistryBuilder::dir`]. With none configured,
//! [`MultiprocessRegistry::from_env`] returns [`ClientError::NoDirectory`]
//! (the rule is [`EnvDir`]'s, the same in every part of multiprom):
//! there is no silent in-memory fallback. The directory must exist. Files are
//! named with the pid, or with [`RegistryBuilder::process_id`].
//!
//! # Errors
//!
//! Failures (directory missing, permission denied, disk full, a child whose
//! key would be longer than readers take,
//! [`multiprom_format::layout::MAX_KEY_LEN`]) are returned by the call that
//! creates a metric or a child. A corrupt file left by an earlier process
//! with the same identifier is moved aside (`<name>.corrupt-<seconds>`,
//! printed on stderr) and a new one begun, as multiprom's Python writer does
//! ([`multiprom_format::FileWriter::open_setting_aside`]); only one that
//! cannot be moved is an error. The blocks an
//! entry needs are allocated before it is written, so a full disk never
//! turns into a SIGBUS on a later update; handles stay valid while files
//! grow. Updates never fail, except
//! [`Counter::inc_by`] with a negative amount and the `*_with_exemplar`
//! updates with refused exemplar labels.
//!
//! # Files shared with other processes
//!
//! Every handle updates its value through a shared memory map of its file
//! (a [`multiprom_format::ValueSlot`]). Another process deleting the file
//! (`mark_process_dead`, a reaper) is harmless: updates go on into the
//! unlinked file. Another process **truncating** it makes the next update
//! of a value past the new end raise SIGBUS, which kills the process unless
//! it handles that signal, as it kills a Python worker in the same case; the
//! shared-map format gives no way to prevent it, so keep tools that shrink
//! files out of the directory.
//!
//! A worker that finds a file with its name already there (its pid reused
//! after an earlier worker, Python or Rust, exited) continues it, as Python
//! does: the existing entries keep their values and handles for the same
//! series update them in place. A file whose entries cannot be read is
//! refused with [`ClientError`] rather than appended to (appending after
//! garbage would hide every later update from readers), and so is anything
//! that is not a regular file (a FIFO, a link to a device). Files are sized
//! with `ftruncate`, sparse, as prometheus_client sizes them, and the pages a
//! new series' entry reaches get real blocks before it is written, so a full
//! disk is an error from the call that adds the series (creating a handle)
//! rather than a SIGBUS on a later update.
//!
//! # Threads and `fork()`
//!
//! Handles are `Send + Sync`; updates are lock-free. After `fork()` the child
//! writes to files named with its own pid, as Python does: on its first
//! update (or [`MultiprocessRegistry::reopen_after_fork`]) it creates its own
//! files holding every entry this process had created, starting from 0, and
//! never writes the parent's files. Forks are seen through a `pthread_atfork`
//! handler (one relaxed atomic load per update; a `getpid()` call per update
//! would cost a system call). In a forked child, updates through handles
//! made before the fork take a mutex; handles made after it do not. If the
//! child's files cannot be created, its updates are dropped and the error is
//! printed once (call `reopen_after_fork` to get it as a value).
//! As with any `fork()` of a multi-threaded process, fork while no other
//! thread is registering metrics or creating children.
//!
//! ```
//! use multiprom_client::MultiprocessRegistry;
//! use multiprom_format::fork::run_in_forked_child;
//!
//! let dir = tempfile::tempdir()?;
//! let registry = MultiprocessRegistry::new(dir.path())?;
//! let jobs = registry.counter("jobs", "Jobs done")?;
//! jobs.inc_by(5.0)?;
//!
//! let child = run_in_forked_child(|| {
//!     jobs.inc(); // lands in the child's own counter_<child pid>.db
//!     i32::from(jobs.get() != 1.0)
//! })?;
//! assert!(child.success(), "{child:?}");
//!
//! let read = |pid: u32| multiprom_format::read_file(&dir.path().join(format!("counter_{pid}.db")));
//! assert_eq!(read(std::process::id())?.entries[0].value, 5.0, "parent's file untouched");
//! assert_eq!(read(child.pid)?.entries[0].value, 1.0);
//! assert_eq!(jobs.get(), 5.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// What every handle type (a newtype over `Arc<Series>`) implements the
/// same way: family membership, [`Metric`], and `Debug` showing its series.
macro_rules! handle_impls {
    ($($handle:ident),+) => {$(
        impl crate::family::sealed::Member for $handle {
            fn create(
                writer: &std::sync::Arc<crate::directory_writer::DirectoryWriter>,
                definition: &std::sync::Arc<crate::definition::Definition>,
                label_values: &[&str],
                creator: &mut crate::directory_writer::Creator<'_>,
            ) -> Result<Self, crate::ClientError> {
                let series = crate::series::Series::create(writer, definition, label_values, creator)?;
                Ok($handle { series: std::sync::Arc::new(series) })
            }

            fn series(&self) -> &std::sync::Arc<crate::series::Series> {
                &self.series
            }
        }

        impl crate::Metric for $handle {}

        impl std::fmt::Debug for $handle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($handle)).field(&self.series).finish()
            }
        }
    )+};
}
pub(crate) use handle_impls;

mod clock;
mod counter;
mod definition;
mod directory_writer;
mod error;
mod family;
mod gauge;
mod histogram;
mod native_histogram;
mod native_options;
mod native_recorder;
mod registry;
mod series;
mod summary;
mod timer;
mod validate;

pub use counter::Counter;
pub use error::{BucketsError, ClientError, NativeOptionsError};
pub use family::Family;
pub use gauge::{Gauge, InProgress, MostRecentGauge};
pub use histogram::{Histogram, DEFAULT_BUCKETS};
pub use multiprom_format::GaugeMode;
pub use multiprom_format::{EnvDir, EnvDirError, DIR_ENV_VAR, LEGACY_DIR_ENV_VAR};
pub use native_histogram::NativeHistogram;
pub use native_options::NativeHistogramOptions;
pub use registry::{MultiprocessRegistry, RegistryBuilder};
pub use summary::Summary;
pub use timer::Timer;

/// A metric handle that a [`Family`] can hold: [`Counter`], [`Gauge`],
/// [`MostRecentGauge`], [`Histogram`], [`NativeHistogram`], [`Summary`]. Sealed.
pub trait Metric: family::sealed::Member + std::fmt::Debug {}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod native_tests;
