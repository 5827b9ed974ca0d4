//! File names: `counter_<id>.db`, `gauge_<mode>_<id>.db`, ...

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// One of the ten gauge aggregation modes of `prometheus_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GaugeMode {
    /// One series per process, with a `pid` label.
    All,
    /// Like `All`, for live processes only.
    LiveAll,
    /// The minimum over processes.
    Min,
    /// The minimum over live processes.
    LiveMin,
    /// The maximum over processes.
    Max,
    /// The maximum over live processes.
    LiveMax,
    /// The sum over processes.
    Sum,
    /// The sum over live processes.
    LiveSum,
    /// The most recently set value.
    MostRecent,
    /// The most recently set value among live processes.
    LiveMostRecent,
}

impl GaugeMode {
    /// All ten modes, in Python's documentation order.
    pub const ALL: [GaugeMode; 10] = [
        GaugeMode::All,
        GaugeMode::LiveAll,
        GaugeMode::Min,
        GaugeMode::LiveMin,
        GaugeMode::Max,
        GaugeMode::LiveMax,
        GaugeMode::Sum,
        GaugeMode::LiveSum,
        GaugeMode::MostRecent,
        GaugeMode::LiveMostRecent,
    ];

    /// The mode as it appears in file names and in Python's API.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            GaugeMode::All => "all",
            GaugeMode::LiveAll => "liveall",
            GaugeMode::Min => "min",
            GaugeMode::LiveMin => "livemin",
            GaugeMode::Max => "max",
            GaugeMode::LiveMax => "livemax",
            GaugeMode::Sum => "sum",
            GaugeMode::LiveSum => "livesum",
            GaugeMode::MostRecent => "mostrecent",
            GaugeMode::LiveMostRecent => "livemostrecent",
        }
    }

    /// Whether files of this mode are deleted when their process dies
    /// (`mark_process_dead`).
    #[must_use]
    pub const fn is_live(self) -> bool {
        matches!(
            self,
            GaugeMode::LiveAll
                | GaugeMode::LiveMin
                | GaugeMode::LiveMax
                | GaugeMode::LiveSum
                | GaugeMode::LiveMostRecent
        )
    }

    /// Whether `inc`/`dec` are allowed (not for the `mostrecent` modes).
    #[must_use]
    pub const fn allows_inc(self) -> bool {
        !matches!(self, GaugeMode::MostRecent | GaugeMode::LiveMostRecent)
    }

    /// Whether merged samples keep a `pid` label (`all` and `liveall`: each
    /// process's value is a series of its own).
    #[must_use]
    pub const fn keeps_pid(self) -> bool {
        matches!(
            crate::MergeRule::of_gauge(self),
            crate::MergeRule::PerProcess
        )
    }
}

impl fmt::Display for GaugeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for GaugeMode {
    type Err = FileNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GaugeMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| FileNameError::UnknownGaugeMode(s.to_owned()))
    }
}

/// What a file holds: its metric type and, for gauges, the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetricKind {
    /// `counter_<id>.db`
    Counter,
    /// `gauge_<mode>_<id>.db`
    Gauge(GaugeMode),
    /// `histogram_<id>.db`
    Histogram,
    /// `summary_<id>.db`
    Summary,
}

impl MetricKind {
    /// The Prometheus type name: `counter`, `gauge`, `histogram`, `summary`.
    #[must_use]
    pub const fn type_name(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge(_) => "gauge",
            MetricKind::Histogram => "histogram",
            MetricKind::Summary => "summary",
        }
    }

    /// The gauge mode, for gauges.
    #[must_use]
    pub const fn gauge_mode(self) -> Option<GaugeMode> {
        match self {
            MetricKind::Gauge(mode) => Some(mode),
            _ => None,
        }
    }
}

impl fmt::Display for MetricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricKind::Gauge(mode) => write!(f, "gauge_{mode}"),
            other => f.write_str(other.type_name()),
        }
    }
}

/// Why a file name is not a metrics file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileNameError {
    /// The name does not end in `.db`.
    #[error("not a metrics file: the name does not end in \".db\"")]
    NotDb,
    /// The prefix is not `counter`, `gauge`, `histogram` or `summary`.
    #[error("not a metrics file: unknown type prefix {0:?} (expected counter, gauge, histogram or summary)")]
    UnknownType(String),
    /// A gauge file names a mode that is not one of the ten.
    #[error("unknown gauge mode {0:?}")]
    UnknownGaugeMode(String),
    /// Nothing between the prefix and `.db`.
    #[error("the process id is empty")]
    EmptyId,
    /// The id contains `_`, which Python's reader splits on.
    #[error("the process id {0:?} contains '_' (Python takes the gauge pid label from the third '_'-separated part)")]
    IdContainsUnderscore(String),
    /// The id contains a path separator or NUL.
    #[error("the process id {0:?} contains '/' or NUL")]
    IdNotAFileName(String),
}

/// The id of every compacted file (`counter_compacted.db`, ...): not a pid,
/// so nothing ever takes it for a worker's file, and
/// `mark_process_dead` never touches it.
pub const COMPACTED_ID: &str = "compacted";

/// The directory inside a metrics directory where compaction stages the
/// files it folds: a dot-name, so no writer opens and no scan lists what
/// waits there.
pub const STAGING_DIR: &str = ".multiprom-compaction";

/// A parsed metrics file name.
///
/// ```
/// use multiprom_format::{FileName, GaugeMode, MetricKind};
/// let name: FileName = "gauge_livesum_42.db".parse().unwrap();
/// assert_eq!(name.kind(), MetricKind::Gauge(GaugeMode::LiveSum));
/// assert_eq!(name.id(), "42");
/// assert_eq!(name.to_string(), "gauge_livesum_42.db");
/// assert!("app.db".parse::<FileName>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileName {
    kind: MetricKind,
    /// Shared: a collector hands a file's name to every scrape's report.
    id: Arc<str>,
}

impl FileName {
    /// A file name for writing. Refuses ids Python's reader would misread.
    pub fn new(kind: MetricKind, id: impl Into<String>) -> Result<Self, FileNameError> {
        let id: String = id.into();
        validate_id(&id)?;
        Ok(FileName {
            kind,
            id: Arc::from(id),
        })
    }

    /// Metric type and gauge mode.
    #[must_use]
    pub fn kind(&self) -> MetricKind {
        self.kind
    }

    /// The process identifier (usually the pid).
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id as a pid, when it is one.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.id.parse().ok()
    }

    /// Parses a file name (not a path).
    pub fn parse(name: &str) -> Result<Self, FileNameError> {
        let stem = name.strip_suffix(".db").ok_or(FileNameError::NotDb)?;
        let (prefix, rest) = stem
            .split_once('_')
            .ok_or_else(|| FileNameError::UnknownType(stem.to_owned()))?;
        let kind = match prefix {
            "counter" => MetricKind::Counter,
            "histogram" => MetricKind::Histogram,
            "summary" => MetricKind::Summary,
            "gauge" => {
                let (mode, id) = rest
                    .split_once('_')
                    .ok_or_else(|| FileNameError::UnknownGaugeMode(rest.to_owned()))?;
                let mode: GaugeMode = mode.parse()?;
                validate_id(id)?;
                return Ok(FileName {
                    kind: MetricKind::Gauge(mode),
                    id: Arc::from(id),
                });
            }
            other => return Err(FileNameError::UnknownType(other.to_owned())),
        };
        validate_id(rest)?;
        Ok(FileName {
            kind,
            id: Arc::from(rest),
        })
    }
}

fn validate_id(id: &str) -> Result<(), FileNameError> {
    if id.is_empty() {
        return Err(FileNameError::EmptyId);
    }
    if id.contains('_') {
        return Err(FileNameError::IdContainsUnderscore(id.to_owned()));
    }
    if id.contains(['/', '\0']) {
        return Err(FileNameError::IdNotAFileName(id.to_owned()));
    }
    Ok(())
}

impl FromStr for FileName {
    type Err = FileNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FileName::parse(s)
    }
}

impl fmt::Display for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}.db", self.kind, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind() {
        let mut kinds = vec![
            MetricKind::Counter,
            MetricKind::Histogram,
            MetricKind::Summary,
        ];
        kinds.extend(GaugeMode::ALL.map(MetricKind::Gauge));
        for kind in kinds {
            let name = FileName::new(kind, "1234").unwrap();
            let text = name.to_string();
            assert_eq!(FileName::parse(&text).unwrap(), name, "{text}");
        }
        assert_eq!(
            FileName::new(MetricKind::Gauge(GaugeMode::LiveMostRecent), "7")
                .unwrap()
                .to_string(),
            "gauge_livemostrecent_7.db"
        );
    }

    #[test]
    fn rejects_foreign_names() {
        use FileNameError::*;
        let cases: &[(&str, FileNameError)] = &[
            ("app.db", UnknownType("app".into())),
            ("counter_1.txt", NotDb),
            ("counter_.db", EmptyId),
            ("foo_1.db", UnknownType("foo".into())),
            ("gauge_1.db", UnknownGaugeMode("1".into())),
            ("gauge_bogus_1.db", UnknownGaugeMode("bogus".into())),
            ("gauge_all_1_2.db", IdContainsUnderscore("1_2".into())),
            ("counter_a_b.db", IdContainsUnderscore("a_b".into())),
            ("Counter_1.db", UnknownType("Counter".into())),
        ];
        for (name, want) in cases {
            assert_eq!(&FileName::parse(name).unwrap_err(), want, "{name}");
        }
        assert!(FileName::new(MetricKind::Counter, "a_b").is_err());
        assert!(FileName::new(MetricKind::Counter, "a/b").is_err());
    }
}
