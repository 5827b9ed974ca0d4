//! multiprom's own metrics (`multiprom_*`), appended to every `/metrics`
//! answer after the workers' families.
//!
//! They are built as [`MergedFamily`] values, the same data the merge
//! produces, so the project's own encoders write them in both formats with
//! the same escaping and number formatting as the workers' families.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use multiprom_collector::{FamilyType, LabelSet, MergedFamily, MergedSample, ScrapeStats};
use multiprom_maintain::{CompactionStatus, MaintenanceStatus};

/// The prefix of every self-metric.
pub(crate) const PREFIX: &str = "multiprom";

/// How a scrape request ended, for `multiprom_scrapes_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScrapeResult {
    /// Answered with metrics (or the status page).
    Ok,
    /// Too many scrapes at once: 503.
    Busy,
    /// The scrape overran its timeout: 503.
    Timeout,
    /// The directory could not be listed, or the scrape failed.
    Error,
}

impl ScrapeResult {
    /// In label-value order, so the series come out sorted.
    const ALL: [ScrapeResult; 4] = [
        ScrapeResult::Busy,
        ScrapeResult::Error,
        ScrapeResult::Ok,
        ScrapeResult::Timeout,
    ];

    /// The label value.
    #[must_use]
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            ScrapeResult::Ok => "ok",
            ScrapeResult::Busy => "busy",
            ScrapeResult::Timeout => "timeout",
            ScrapeResult::Error => "error",
        }
    }

    const fn index(self) -> usize {
        match self {
            ScrapeResult::Busy => 0,
            ScrapeResult::Error => 1,
            ScrapeResult::Ok => 2,
            ScrapeResult::Timeout => 3,
        }
    }
}

/// The self-metrics' state: counters, and the last scrape's numbers.
#[derive(Debug, Default)]
pub(crate) struct SelfMetrics {
    scrapes: [AtomicU64; 4],
    /// The last recorded scrape. Recording and building the families happen
    /// under this lock, so a response never shows another scrape's numbers.
    last: Mutex<ScrapeStats>,
}

impl SelfMetrics {
    pub(crate) fn new() -> Self {
        SelfMetrics::default()
    }

    /// Counts a finished scrape request.
    pub(crate) fn count_scrape(&self, result: ScrapeResult) {
        self.scrapes[result.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Records `stats`, counts an ok scrape, and returns the self-metrics,
    /// with what the maintainer has done, if there is one.
    pub(crate) fn record(
        &self,
        stats: &ScrapeStats,
        maintenance: Option<&MaintenanceStatus>,
    ) -> Vec<MergedFamily> {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *last = *stats;
        self.count_scrape(ScrapeResult::Ok);
        self.families(&last, maintenance)
    }

    /// Records a scrape that read nothing (the directory could not be
    /// listed; counted as an error by the caller) and returns the
    /// self-metrics.
    pub(crate) fn record_nothing_read(
        &self,
        maintenance: Option<&MaintenanceStatus>,
    ) -> Vec<MergedFamily> {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *last = ScrapeStats::default();
        self.families(&last, maintenance)
    }

    fn families(
        &self,
        stats: &ScrapeStats,
        maintenance: Option<&MaintenanceStatus>,
    ) -> Vec<MergedFamily> {
        let files = [
            ("bad", stats.files_bad),
            ("ok", stats.files_ok),
            ("vanished", stats.files_vanished),
        ];
        let mut families = vec![
            gauge(
                "multiprom_scrape_duration_seconds",
                "Time the last scrape spent listing, reading and merging the directory.",
                stats.duration.as_secs_f64(),
            ),
            family(
                "multiprom_scrape_files",
                "Files seen by the last scrape: ok (merged), bad (skipped: damaged or foreign), vanished (deleted while read).",
                FamilyType::Gauge,
                files
                    .iter()
                    .map(|(state, n)| sample("multiprom_scrape_files", labels(&[("state", state)]), *n as f64))
                    .collect(),
            ),
            gauge(
                "multiprom_scrape_read_bytes",
                "Bytes the last scrape read from the directory.",
                stats.bytes_read as f64,
            ),
            gauge(
                "multiprom_scrape_series",
                "Samples the last scrape produced from the directory.",
                stats.series as f64,
            ),
            family(
                "multiprom_scrapes",
                "Scrape requests answered, by result: ok, busy (too many at once), timeout, error.",
                FamilyType::Counter,
                ScrapeResult::ALL
                    .iter()
                    .map(|result| {
                        sample(
                            "multiprom_scrapes_total",
                            labels(&[("result", result.as_str())]),
                            self.scrapes[result.index()].load(Ordering::Relaxed) as f64,
                        )
                    })
                    .collect(),
            ),
            counter(
                "multiprom_reaped_files",
                "gauge_live* files removed because their process was gone.",
                maintenance.map_or(0, |m| m.reaped_files) as f64,
            ),
            family(
                "multiprom_build_info",
                "multiprom build information.",
                FamilyType::Gauge,
                vec![sample(
                    "multiprom_build_info",
                    labels(&[("version", env!("CARGO_PKG_VERSION"))]),
                    1.0,
                )],
            ),
        ];
        if let Some(compaction) = maintenance.and_then(|m| m.compaction.as_ref()) {
            families.extend(compaction_families(compaction));
        }
        families
    }
}

/// `multiprom_compactions_total{result}`,
/// `multiprom_compaction_folded_files_total`,
/// `multiprom_compaction_reclaimed_bytes_total` and
/// `multiprom_compaction_last_duration_seconds`.
fn compaction_families(compaction: &CompactionStatus) -> Vec<MergedFamily> {
    vec![
        family(
            "multiprom_compactions",
            "Compaction passes over the directory, by result: ok or error.",
            FamilyType::Counter,
            vec![
                sample(
                    "multiprom_compactions_total",
                    labels(&[("result", "error")]),
                    compaction.passes_failed as f64,
                ),
                sample(
                    "multiprom_compactions_total",
                    labels(&[("result", "ok")]),
                    compaction.passes_ok as f64,
                ),
            ],
        ),
        counter(
            "multiprom_compaction_folded_files",
            "Files of exited workers folded into *_compacted.db files.",
            compaction.files_folded as f64,
        ),
        counter(
            "multiprom_compaction_reclaimed_bytes",
            "Disk space freed by compaction.",
            compaction.bytes_reclaimed as f64,
        ),
        gauge(
            "multiprom_compaction_last_duration_seconds",
            "Time the last compaction pass took.",
            compaction.last_duration.as_secs_f64(),
        ),
    ]
}

/// A family of `samples`.
pub(crate) fn family(
    name: &str,
    help: &str,
    family_type: FamilyType,
    samples: Vec<MergedSample>,
) -> MergedFamily {
    MergedFamily {
        name: name.into(),
        help: help.into(),
        family_type,
        gauge_mode: None,
        samples,
    }
}

/// A gauge family with one unlabelled sample.
pub(crate) fn gauge(name: &str, help: &str, value: f64) -> MergedFamily {
    family(
        name,
        help,
        FamilyType::Gauge,
        vec![sample(name, labels(&[]), value)],
    )
}

/// A counter family (`name` without `_total`) with one unlabelled sample.
pub(crate) fn counter(name: &str, help: &str, value: f64) -> MergedFamily {
    family(
        name,
        help,
        FamilyType::Counter,
        vec![sample(&format!("{name}_total"), labels(&[]), value)],
    )
}

/// One sample.
pub(crate) fn sample(name: &str, labels: LabelSet, value: f64) -> MergedSample {
    MergedSample {
        name: name.into(),
        labels,
        value,
        exemplar: None,
    }
}

/// Labels, given sorted by name.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> LabelSet {
    pairs
        .iter()
        .map(|(name, value)| (Arc::from(*name), Arc::from(*value)))
        .collect()
}

/// Prefixes of the names multiprom adds to the workers' families.
const OWN_PREFIXES: [&str; 2] = [PREFIX, "process_"];

/// Names the workers' families use (family and sample names) that
/// multiprom's own could clash with.
pub(crate) fn reserved_names(families: &[MergedFamily]) -> HashSet<&str> {
    let ours = |name: &str| OWN_PREFIXES.iter().any(|p| name.starts_with(p));
    let mut names = HashSet::new();
    for family in families
        .iter()
        .filter(|f| ours(&f.name) || f.samples.iter().any(|s| ours(&s.name)))
    {
        names.insert(&*family.name);
        names.extend(family.samples.iter().map(|s| &*s.name));
    }
    names
}

/// Splits `own` into the families to serve and the names of those left out
/// because a worker family already uses one of their names (worker data
/// wins: two families of one name would make the whole answer invalid).
pub(crate) fn without_clashes(
    own: Vec<MergedFamily>,
    reserved: &HashSet<&str>,
) -> (Vec<MergedFamily>, Vec<Arc<str>>) {
    let mut kept = Vec::with_capacity(own.len());
    let mut left_out = Vec::new();
    for family in own {
        let total = format!("{}_total", family.name);
        let clashes = reserved.contains(&*family.name)
            || (family.family_type == FamilyType::Counter && reserved.contains(total.as_str()))
            || family.samples.iter().any(|s| reserved.contains(&*s.name));
        if clashes {
            left_out.push(family.name);
        } else {
            kept.push(family);
        }
    }
    (kept, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use multiprom_collector::Format;
    use std::time::Duration;

    fn stats() -> ScrapeStats {
        let mut stats = ScrapeStats::default();
        stats.files_ok = 3;
        stats.files_bad = 1;
        stats.files_vanished = 0;
        stats.bytes_read = 4096;
        stats.series = 17;
        stats.duration = Duration::from_millis(1500);
        stats.collection = 1;
        stats.planned = true;
        stats.full_look = true;
        stats.files_settled = 0;
        stats
    }

    #[test]
    fn both_formats_through_the_project_encoders() {
        let metrics = SelfMetrics::new();
        metrics.count_scrape(ScrapeResult::Busy);
        let mut maintenance = MaintenanceStatus::default();
        maintenance.reaped_files = 2;
        let families = metrics.record(&stats(), Some(&maintenance));
        let mut text = String::new();
        Format::Prometheus.encode(&families, &mut text);
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            text,
            format!(
                r#"# HELP multiprom_scrape_duration_seconds Time the last scrape spent listing, reading and merging the directory.
# TYPE multiprom_scrape_duration_seconds gauge
multiprom_scrape_duration_seconds 1.5
# HELP multiprom_scrape_files Files seen by the last scrape: ok (merged), bad (skipped: damaged or foreign), vanished (deleted while read).
# TYPE multiprom_scrape_files gauge
multiprom_scrape_files{{state="bad"}} 1.0
multiprom_scrape_files{{state="ok"}} 3.0
multiprom_scrape_files{{state="vanished"}} 0.0
# HELP multiprom_scrape_read_bytes Bytes the last scrape read from the directory.
# TYPE multiprom_scrape_read_bytes gauge
multiprom_scrape_read_bytes 4096.0
# HELP multiprom_scrape_series Samples the last scrape produced from the directory.
# TYPE multiprom_scrape_series gauge
multiprom_scrape_series 17.0
# HELP multiprom_scrapes_total Scrape requests answered, by result: ok, busy (too many at once), timeout, error.
# TYPE multiprom_scrapes_total counter
multiprom_scrapes_total{{result="busy"}} 1.0
multiprom_scrapes_total{{result="error"}} 0.0
multiprom_scrapes_total{{result="ok"}} 1.0
multiprom_scrapes_total{{result="timeout"}} 0.0
# HELP multiprom_reaped_files_total gauge_live* files removed because their process was gone.
# TYPE multiprom_reaped_files_total counter
multiprom_reaped_files_total 2.0
# HELP multiprom_build_info multiprom build information.
# TYPE multiprom_build_info gauge
multiprom_build_info{{version="{version}"}} 1.0
"#
            )
        );
        let mut openmetrics = String::new();
        Format::OpenMetrics.encode(&families, &mut openmetrics);
        assert!(
            openmetrics.contains(
                "# TYPE multiprom_scrapes counter\nmultiprom_scrapes_total{result=\"busy\"} 1.0\n"
            ),
            "{openmetrics}"
        );
        assert!(
            openmetrics.ends_with(&format!(
                "# TYPE multiprom_build_info gauge\nmultiprom_build_info{{version=\"{version}\"}} 1.0\n# EOF\n"
            )),
            "{openmetrics}"
        );
    }

    #[test]
    fn worker_families_with_our_names_win() {
        let metrics = SelfMetrics::new();
        let workers = vec![
            counter("multiprom_scrapes", "a worker's", 1.0),
            gauge("multiprom_build_info", "a worker's", 1.0),
            gauge("unrelated", "a worker's", 1.0),
        ];
        let reserved = reserved_names(&workers);
        assert!(!reserved.contains("unrelated"));
        let (kept, left_out) = without_clashes(metrics.record(&stats(), None), &reserved);
        assert_eq!(
            left_out,
            [
                Arc::from("multiprom_scrapes"),
                Arc::from("multiprom_build_info")
            ]
        );
        assert!(kept.iter().any(|f| &*f.name == "multiprom_scrape_series"));
        assert_eq!(kept.len(), 5);
    }
}
