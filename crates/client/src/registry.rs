//! The entry point: where files go, and registering metrics.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::{EnvDir, FileName, GaugeMode, MetricKind, DIR_ENV_VAR, LEGACY_DIR_ENV_VAR};

use crate::definition::Definition;
use crate::directory_writer::{directory_writer_for, DirectoryWriter, IdSource};
use crate::error::ClientError;
use crate::family::Family;
use crate::{
    Counter, Gauge, Histogram, Metric, MostRecentGauge, NativeHistogram, NativeHistogramOptions,
    Summary,
};

/// Configures a [`MultiprocessRegistry`].
#[derive(Debug, Clone, Default)]
pub struct RegistryBuilder {
    dir: Option<PathBuf>,
    process_id: Option<String>,
}

impl RegistryBuilder {
    /// Writes into `dir` instead of the directory named by the environment.
    #[must_use]
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Names files with `id` instead of the pid (Python's custom
    /// `process_identifier`). It must be unique among the processes writing
    /// the directory, and must not contain `_` or `/`. A process forked from
    /// this one uses `<id>-<its pid>`, so that no two processes share a file.
    #[must_use]
    pub fn process_id(mut self, id: impl Into<String>) -> Self {
        self.process_id = Some(id.into());
        self
    }

    /// Checks the configuration and returns the registry. No file is
    /// created until the first metric of a type is.
    ///
    /// Without [`RegistryBuilder::dir`], reads the environment like
    /// [`MultiprocessRegistry::from_env`] (and prints a deprecation warning
    /// for [`LEGACY_DIR_ENV_VAR`]).
    pub fn build(self) -> Result<MultiprocessRegistry, ClientError> {
        let dir = match self.dir {
            Some(dir) => dir,
            None => {
                let env = EnvDir::from_env()?;
                if env.is_legacy() {
                    eprintln!(
                        "multiprom-client: {LEGACY_DIR_ENV_VAR} is deprecated in favor of {DIR_ENV_VAR}"
                    );
                }
                env.path
            }
        };
        let meta = std::fs::metadata(&dir).map_err(|source| ClientError::Directory {
            path: dir.clone(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(ClientError::Directory {
                path: dir,
                source: io::Error::other("not a directory"),
            });
        }
        let canonical = std::fs::canonicalize(&dir)
            .map_err(|source| ClientError::Directory { path: dir, source })?;
        let id_source = match self.process_id {
            Some(id) => {
                FileName::new(MetricKind::Counter, id.as_str())
                    .map_err(ClientError::InvalidProcessId)?;
                IdSource::Fixed(id)
            }
            None => IdSource::Pid,
        };
        let generation =
            multiprom_format::fork::watch_forks().map_err(ClientError::ForkDetection)?;
        Ok(MultiprocessRegistry {
            writer: directory_writer_for(canonical, id_source, generation),
        })
    }
}

/// Creates metrics whose values live in `prometheus_client` multiprocess
/// files, one file per (type or gauge mode, process) in one directory.
///
/// Cloning is cheap and clones share everything. Registries built for the
/// same directory and identifier setting in one process share their files
/// and registrations (two writers on one file would overwrite each other).
/// As in Python, files and registrations stay open for the life of the
/// process, even when every registry handle is dropped.
///
/// Registering a name again with the identical definition returns the same
/// metric; with a different type, help, labels, buckets or gauge mode it is
/// an error ([`ClientError::Conflict`]), as is a name whose samples overlap
/// another metric's ([`ClientError::NameClash`]).
#[derive(Debug, Clone)]
pub struct MultiprocessRegistry {
    writer: Arc<DirectoryWriter>,
}

impl MultiprocessRegistry {
    /// Writes into the directory named by `PROMETHEUS_MULTIPROC_DIR` (or the
    /// legacy `prometheus_multiproc_dir`, with a warning on stderr).
    ///
    /// With neither set this is [`ClientError::NoDirectory`] ([`multiprom_format::EnvDirError::Unset`]): there is no
    /// in-memory fallback, because nothing in this crate would ever serve
    /// in-memory values; a worker that silently wrote nowhere would be worse.
    pub fn from_env() -> Result<MultiprocessRegistry, ClientError> {
        RegistryBuilder::default().build()
    }

    /// Writes into `dir`, naming files with the pid.
    pub fn new(dir: impl Into<PathBuf>) -> Result<MultiprocessRegistry, ClientError> {
        RegistryBuilder::default().dir(dir).build()
    }

    /// A builder, for a custom process identifier.
    #[must_use]
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// The directory (canonicalized).
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.writer.dir()
    }

    /// The identifier in this process's file names: the pid, or the custom
    /// identifier (with `-<pid>` appended in a forked child).
    #[must_use]
    pub fn process_id(&self) -> String {
        self.writer.process_id()
    }

    /// Whether files are named with the pid (no custom identifier).
    #[must_use]
    pub fn uses_pid(&self) -> bool {
        matches!(self.writer.id_source(), IdSource::Pid)
    }

    /// In a forked child, creates this process's files and every known entry
    /// now, returning any error, instead of on the first update (where an
    /// error can only be printed). A no-op in a process that has not forked.
    ///
    /// ```
    /// use multiprom_client::{GaugeMode, MultiprocessRegistry};
    /// use multiprom_format::{fork::run_in_forked_child, read_file};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let registry = MultiprocessRegistry::builder().dir(dir.path()).process_id("web1").build()?;
    /// let hits = registry.counter_family("hits", "Hits", &["page"])?;
    /// hits.labels(&["/a"])?.inc();
    /// hits.labels(&["/b"])?.inc();
    /// registry.gauge("temp", "Temperature", GaugeMode::Max)?.set(3.0);
    ///
    /// let child = run_in_forked_child(|| {
    ///     // A fixed identifier gets the child's pid appended.
    ///     let id = format!("web1-{}", std::process::id());
    ///     let ok = registry.reopen_after_fork().is_ok() && registry.process_id() == id;
    ///     // Every entry the parent had created exists in the child's files, at 0.
    ///     let read = |file: &str| read_file(&registry.dir().join(file)).map(|c| c.entries);
    ///     let counters = read(&format!("counter_{id}.db")).unwrap_or_default();
    ///     let gauges = read(&format!("gauge_max_{id}.db")).unwrap_or_default();
    ///     let ok = ok
    ///         && counters.len() == 2
    ///         && counters.iter().all(|e| e.value == 0.0)
    ///         && gauges.len() == 1
    ///         && gauges[0].value == 0.0;
    ///     i32::from(!ok)
    /// })?;
    /// assert!(child.success(), "{child:?}");
    /// assert_eq!(registry.process_id(), "web1");
    /// let parent = read_file(&dir.path().join("counter_web1.db"))?.entries;
    /// assert_eq!(parent.iter().map(|e| e.value).collect::<Vec<_>>(), [1.0, 1.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reopen_after_fork(&self) -> Result<(), ClientError> {
        self.writer.reopen_after_fork()
    }

    /// A counter without labels. A trailing `_total` in `name` is dropped
    /// from the family name (the sample is always `<family>_total`).
    pub fn counter(&self, name: &str, help: &str) -> Result<Counter, ClientError> {
        self.plain(Definition::new(name, MetricKind::Counter, help, None, &[])?)
    }

    /// A counter family with `label_names`.
    pub fn counter_family(
        &self,
        name: &str,
        help: &str,
        label_names: &[&str],
    ) -> Result<Family<Counter>, ClientError> {
        self.family(Definition::new(
            name,
            MetricKind::Counter,
            help,
            Some(label_names),
            &[],
        )?)
    }

    /// A gauge without labels, in one of the eight modes that allow
    /// `inc`/`dec` (Python's default is [`GaugeMode::All`]). The two
    /// `mostrecent` modes are refused here: see
    /// [`MultiprocessRegistry::most_recent_gauge`].
    pub fn gauge(&self, name: &str, help: &str, mode: GaugeMode) -> Result<Gauge, ClientError> {
        self.plain(gauge_definition(name, help, mode, false, None)?)
    }

    /// A gauge family; see [`MultiprocessRegistry::gauge`].
    pub fn gauge_family(
        &self,
        name: &str,
        help: &str,
        mode: GaugeMode,
        label_names: &[&str],
    ) -> Result<Family<Gauge>, ClientError> {
        self.family(gauge_definition(
            name,
            help,
            mode,
            false,
            Some(label_names),
        )?)
    }

    /// A gauge in mode [`GaugeMode::MostRecent`] or
    /// [`GaugeMode::LiveMostRecent`] (other modes are refused).
    pub fn most_recent_gauge(
        &self,
        name: &str,
        help: &str,
        mode: GaugeMode,
    ) -> Result<MostRecentGauge, ClientError> {
        self.plain(gauge_definition(name, help, mode, true, None)?)
    }

    /// A most-recent gauge family; see
    /// [`MultiprocessRegistry::most_recent_gauge`].
    pub fn most_recent_gauge_family(
        &self,
        name: &str,
        help: &str,
        mode: GaugeMode,
        label_names: &[&str],
    ) -> Result<Family<MostRecentGauge>, ClientError> {
        self.family(gauge_definition(name, help, mode, true, Some(label_names))?)
    }

    /// A histogram without labels. `buckets` are upper bounds in ascending
    /// order ([`DEFAULT_BUCKETS`](crate::DEFAULT_BUCKETS) are Python's);
    /// `+Inf` is appended if missing.
    pub fn histogram(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
    ) -> Result<Histogram, ClientError> {
        self.plain(Definition::new(
            name,
            MetricKind::Histogram,
            help,
            None,
            buckets,
        )?)
    }

    /// A histogram family; see [`MultiprocessRegistry::histogram`].
    pub fn histogram_family(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
        label_names: &[&str],
    ) -> Result<Family<Histogram>, ClientError> {
        self.family(Definition::new(
            name,
            MetricKind::Histogram,
            help,
            Some(label_names),
            buckets,
        )?)
    }

    /// A native histogram without labels: Prometheus's exponential buckets,
    /// recorded beside a classic part (see [`NativeHistogram`]). Names and
    /// labels follow the histogram's rules; options outside what Prometheus
    /// accepts are [`ClientError::InvalidNativeOptions`].
    ///
    /// Like every creating call, this returns the failure to create its
    /// files, the native histogram file included: a metric that cannot
    /// record natively is refused rather than made quietly classic-only.
    pub fn native_histogram(
        &self,
        name: &str,
        help: &str,
        options: NativeHistogramOptions,
    ) -> Result<NativeHistogram, ClientError> {
        self.plain(Definition::native(name, help, None, &options)?)
    }

    /// A native histogram family; see [`MultiprocessRegistry::native_histogram`].
    pub fn native_histogram_family(
        &self,
        name: &str,
        help: &str,
        options: NativeHistogramOptions,
        label_names: &[&str],
    ) -> Result<Family<NativeHistogram>, ClientError> {
        self.family(Definition::native(name, help, Some(label_names), &options)?)
    }

    /// A summary (count and sum) without labels.
    pub fn summary(&self, name: &str, help: &str) -> Result<Summary, ClientError> {
        self.plain(Definition::new(name, MetricKind::Summary, help, None, &[])?)
    }

    /// A summary family.
    pub fn summary_family(
        &self,
        name: &str,
        help: &str,
        label_names: &[&str],
    ) -> Result<Family<Summary>, ClientError> {
        self.family(Definition::new(
            name,
            MetricKind::Summary,
            help,
            Some(label_names),
            &[],
        )?)
    }

    fn plain<M: Metric>(&self, definition: Definition) -> Result<M, ClientError> {
        self.writer
            .register(definition, |writer, definition, creator| {
                M::create(writer, &definition, &[], creator)
            })
    }

    fn family<M: Metric>(&self, definition: Definition) -> Result<Family<M>, ClientError> {
        self.writer.register(definition, |writer, definition, _| {
            Ok(Family::new(Arc::clone(writer), definition))
        })
    }
}

fn gauge_definition(
    name: &str,
    help: &str,
    mode: GaugeMode,
    most_recent: bool,
    label_names: Option<&[&str]>,
) -> Result<Definition, ClientError> {
    if mode.allows_inc() == most_recent {
        return Err(ClientError::WrongGaugeMode {
            metric: name.to_owned(),
            mode,
            reason: if most_recent {
                "allows inc/dec: use gauge() or gauge_family()"
            } else {
                "only allows set: use most_recent_gauge() or most_recent_gauge_family()"
            },
        });
    }
    Definition::new(name, MetricKind::Gauge(mode), help, label_names, &[])
}
