//! multiprom's own metrics (`multiprom_*`), kept with the `prometheus-client`
//! crate and appended after the workers' families.
//!
//! `prometheus-client` only speaks OpenMetrics. Its output is split into one
//! block per family, then either used as is (OpenMetrics; the single `# EOF`
//! is written by the caller) or rewritten to valid text 0.0.4: counters are
//! named `<name>_total` in `# HELP`/`# TYPE` (as Python's 0.0.4 output does),
//! `info` becomes a `gauge` named `<name>_info`, `# UNIT` lines are dropped.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use multiprom_collector::{Format, MergedFamily, ScrapeStats};
use prometheus_client::encoding::text::encode_registry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

/// The prefix of every self-metric.
pub const PREFIX: &str = "multiprom";

/// How a scrape request ended, for `multiprom_scrapes_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrapeResult {
    /// Answered with metrics (or the status page).
    Ok,
    /// Too many scrapes at once: 503.
    Busy,
    /// The scrape overran its timeout: 503.
    Timeout,
    /// The directory could not be listed, or the scrape failed: 500.
    Error,
}

impl ScrapeResult {
    const ALL: [ScrapeResult; 4] = [
        ScrapeResult::Ok,
        ScrapeResult::Busy,
        ScrapeResult::Timeout,
        ScrapeResult::Error,
    ];

    /// The label value.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ScrapeResult::Ok => "ok",
            ScrapeResult::Busy => "busy",
            ScrapeResult::Timeout => "timeout",
            ScrapeResult::Error => "error",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

/// The self-metrics registry.
#[derive(Debug)]
pub(crate) struct SelfMetrics {
    registry: Registry,
    duration: Gauge<f64, AtomicU64>,
    files: Family<StateLabels, Gauge>,
    read_bytes: Gauge,
    series: Gauge,
    scrapes: Family<ResultLabels, Counter>,
    reaped_files: Counter,
    /// Compaction passes, when compaction is on.
    pub(crate) compaction: Option<crate::compact::CompactionTotals>,
    /// Makes "record this scrape's stats, then encode" one step, so a
    /// response never shows another scrape's numbers.
    render: Mutex<()>,
}

impl SelfMetrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let duration = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit(
            "scrape_duration",
            "Time the last scrape spent listing, reading and merging the directory",
            Unit::Seconds,
            duration.clone(),
        );
        let files = Family::<StateLabels, Gauge>::default();
        registry.register(
            "scrape_files",
            "Files seen by the last scrape: ok (merged), bad (skipped: damaged or foreign), vanished (deleted while read)",
            files.clone(),
        );
        let read_bytes = Gauge::default();
        registry.register_with_unit(
            "scrape_read",
            "Bytes the last scrape read from the directory",
            Unit::Bytes,
            read_bytes.clone(),
        );
        let series = Gauge::default();
        registry.register(
            "scrape_series",
            "Samples the last scrape produced from the directory",
            series.clone(),
        );
        let scrapes = Family::<ResultLabels, Counter>::default();
        registry.register(
            "scrapes",
            "Scrape requests answered, by result: ok, busy (too many at once), timeout, error",
            scrapes.clone(),
        );
        let reaped_files = Counter::default();
        registry.register(
            "reaped_files",
            "gauge_live* files removed because their process was gone",
            reaped_files.clone(),
        );
        registry.register(
            "build",
            "multiprom build information",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        // Every series exists from the first scrape on, at zero.
        for state in ["ok", "bad", "vanished"] {
            drop(files.get_or_create(&StateLabels {
                state: state.to_owned(),
            }));
        }
        for result in ScrapeResult::ALL {
            drop(scrapes.get_or_create(&ResultLabels {
                result: result.as_str().to_owned(),
            }));
        }
        SelfMetrics {
            registry,
            duration,
            files,
            read_bytes,
            series,
            scrapes,
            reaped_files,
            compaction: None,
            render: Mutex::new(()),
        }
    }

    /// Adds the compaction self-metrics (`multiprom_compaction*`).
    pub(crate) fn register_compaction(&mut self) {
        self.compaction = Some(crate::compact::CompactionTotals::register(
            &mut self.registry,
        ));
    }

    /// Counts a finished scrape request.
    pub(crate) fn count_scrape(&self, result: ScrapeResult) {
        self.scrapes
            .get_or_create(&ResultLabels {
                result: result.as_str().to_owned(),
            })
            .inc();
    }

    /// Counts removed `gauge_live*` files.
    pub(crate) fn count_reaped(&self, files: usize) {
        self.reaped_files.inc_by(files as u64);
    }

    /// Records `stats`, counts an ok scrape, and returns the self-metrics in
    /// OpenMetrics (without `# EOF`).
    pub(crate) fn record_and_encode(&self, stats: &ScrapeStats) -> String {
        let _one_at_a_time = self
            .render
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.duration.set(stats.duration.as_secs_f64());
        for (state, n) in [
            ("ok", stats.files_ok),
            ("bad", stats.files_bad),
            ("vanished", stats.files_vanished),
        ] {
            self.files
                .get_or_create(&StateLabels {
                    state: state.to_owned(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.read_bytes
            .set(i64::try_from(stats.bytes_read).unwrap_or(i64::MAX));
        self.series
            .set(i64::try_from(stats.series).unwrap_or(i64::MAX));
        self.count_scrape(ScrapeResult::Ok);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        out
    }
}

/// One family of `prometheus-client`'s OpenMetrics output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block<'a> {
    /// The family name (OpenMetrics: counters without `_total`).
    pub name: &'a str,
    /// The OpenMetrics type.
    pub family_type: &'a str,
    /// Every line of the block, without newlines.
    pub lines: Vec<&'a str>,
}

impl Block<'_> {
    /// Sample names in this block.
    fn sample_names(&self) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
    }
}

/// Splits OpenMetrics text (as `prometheus-client` writes it: `# HELP` opens
/// each family) into blocks. `# EOF` is dropped. The samples of counters and
/// gauges are sorted: `Family` keeps its label sets in a hash map, and a
/// stable order makes diffs of two scrapes readable.
pub(crate) fn split_blocks(text: &str) -> Vec<Block<'_>> {
    let mut blocks: Vec<Block<'_>> = Vec::new();
    for line in text.lines() {
        if line == "# EOF" || line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or(rest);
            blocks.push(Block {
                name,
                family_type: "unknown",
                lines: vec![line],
            });
            continue;
        }
        let Some(block) = blocks.last_mut() else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            block.family_type = rest.rsplit(' ').next().unwrap_or("unknown");
        }
        block.lines.push(line);
    }
    for block in &mut blocks {
        if matches!(block.family_type, "counter" | "gauge" | "info") {
            let first_sample = block
                .lines
                .iter()
                .position(|l| !l.starts_with('#'))
                .unwrap_or(block.lines.len());
            block.lines[first_sample..].sort_unstable();
        }
    }
    blocks
}

/// Names the workers' families use under our prefix (family and sample
/// names), which self-metrics must not repeat.
pub(crate) fn reserved_names(families: &[MergedFamily]) -> HashSet<&str> {
    let mut names = HashSet::new();
    for family in families.iter().filter(|f| {
        f.name.starts_with(PREFIX) || f.samples.iter().any(|s| s.name.starts_with(PREFIX))
    }) {
        names.insert(&*family.name);
        names.extend(family.samples.iter().map(|s| &*s.name));
    }
    names
}

/// Appends the self-metric blocks to `out` in `format`, leaving out any
/// whose names a worker family already uses (worker data wins; the names
/// left out are returned so the caller can say so).
pub(crate) fn append_blocks<'a>(
    blocks: &[Block<'a>],
    reserved: &HashSet<&str>,
    format: Format,
    out: &mut String,
) -> Vec<&'a str> {
    let mut left_out = Vec::new();
    for block in blocks {
        let clashes = reserved.contains(block.name)
            || reserved.contains(exposed_name(block).as_str())
            || block.sample_names().any(|s| reserved.contains(s));
        if clashes {
            left_out.push(block.name);
            continue;
        }
        match format {
            Format::OpenMetrics => {
                for line in &block.lines {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            Format::Prometheus => append_text_004(block, out),
        }
    }
    left_out
}

/// The family name text 0.0.4 uses.
fn exposed_name(block: &Block<'_>) -> String {
    match block.family_type {
        "counter" => format!("{}_total", block.name),
        "info" => format!("{}_info", block.name),
        _ => block.name.to_owned(),
    }
}

/// Rewrites one OpenMetrics block as text 0.0.4.
fn append_text_004(block: &Block<'_>, out: &mut String) {
    let name = exposed_name(block);
    let family_type = match block.family_type {
        "counter" => "counter",
        "gauge" | "info" | "stateset" => "gauge",
        "histogram" | "gaugehistogram" => "histogram",
        "summary" => "summary",
        _ => "untyped",
    };
    for line in &block.lines {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let help = rest.split_once(' ').map_or("", |(_, h)| h);
            out.push_str("# HELP ");
            out.push_str(&name);
            out.push(' ');
            out.push_str(help);
            out.push('\n');
        } else if line.starts_with("# TYPE ") {
            out.push_str("# TYPE ");
            out.push_str(&name);
            out.push(' ');
            out.push_str(family_type);
            out.push('\n');
        } else if line.starts_with('#') {
            // `# UNIT` and anything else OpenMetrics-only.
        } else {
            // Exemplars (` # {...}`) do not exist in 0.0.4.
            let sample = line.split_once(" # ").map_or(*line, |(s, _)| s);
            out.push_str(sample);
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn stats() -> ScrapeStats {
        ScrapeStats {
            files_ok: 3,
            files_bad: 1,
            files_vanished: 0,
            bytes_read: 4096,
            series: 17,
            duration: Duration::from_millis(1500),
            collection: 1,
            planned: true,
            full_look: true,
        }
    }

    #[test]
    fn text_004_renames_counters_and_info() {
        let metrics = SelfMetrics::new();
        let om = metrics.record_and_encode(&stats());
        let blocks = split_blocks(&om);
        let mut text = String::new();
        let left_out = append_blocks(&blocks, &HashSet::new(), Format::Prometheus, &mut text);
        assert!(left_out.is_empty());
        let expected = r#"# HELP multiprom_scrape_duration_seconds Time the last scrape spent listing, reading and merging the directory.
# TYPE multiprom_scrape_duration_seconds gauge
multiprom_scrape_duration_seconds 1.5
# HELP multiprom_scrape_files Files seen by the last scrape: ok (merged), bad (skipped: damaged or foreign), vanished (deleted while read).
# TYPE multiprom_scrape_files gauge
multiprom_scrape_files{state="bad"} 1
multiprom_scrape_files{state="ok"} 3
multiprom_scrape_files{state="vanished"} 0
"#;
        assert!(text.starts_with(expected), "{text}");
        assert!(
            text.contains("multiprom_scrape_files{state=\"bad\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "# TYPE multiprom_scrape_read_bytes gauge\nmultiprom_scrape_read_bytes 4096\n"
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE multiprom_scrapes_total counter\nmultiprom_scrapes_total{result=\"busy\"} 0\n"), "{text}");
        assert!(
            text.contains("multiprom_scrapes_total{result=\"ok\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("# HELP multiprom_build_info multiprom build information.\n# TYPE multiprom_build_info gauge\nmultiprom_build_info{version=\""), "{text}");
        assert!(!text.contains("# UNIT"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");

        let mut openmetrics = String::new();
        append_blocks(
            &blocks,
            &HashSet::new(),
            Format::OpenMetrics,
            &mut openmetrics,
        );
        assert!(
            openmetrics.contains("# TYPE multiprom_scrapes counter\n"),
            "{openmetrics}"
        );
        assert!(
            openmetrics.contains("# UNIT multiprom_scrape_duration_seconds seconds\n"),
            "{openmetrics}"
        );
        assert!(
            openmetrics.contains("# TYPE multiprom_build info\n"),
            "{openmetrics}"
        );
        assert!(!openmetrics.contains("# EOF"), "{openmetrics}");
    }

    #[test]
    fn worker_families_with_our_names_win() {
        let metrics = SelfMetrics::new();
        let om = metrics.record_and_encode(&stats());
        let blocks = split_blocks(&om);
        let reserved: HashSet<&str> = ["multiprom_scrapes_total", "multiprom_build_info"].into();
        let mut text = String::new();
        let left_out = append_blocks(&blocks, &reserved, Format::Prometheus, &mut text);
        assert_eq!(left_out, ["multiprom_scrapes", "multiprom_build"]);
        assert!(!text.contains("multiprom_scrapes_total"), "{text}");
        assert!(!text.contains("multiprom_build_info"), "{text}");
        assert!(text.contains("multiprom_scrape_series 17\n"), "{text}");
    }

    #[test]
    fn help_texts_need_no_escaping() {
        // prometheus-client writes help verbatim; ours must be safe in both formats.
        let metrics = SelfMetrics::new();
        let om = metrics.record_and_encode(&stats());
        for line in om.lines().filter(|l| l.starts_with("# HELP")) {
            assert!(!line.contains('\\') && !line.contains('"'), "{line}");
        }
    }
}
