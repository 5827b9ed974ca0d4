//! Native histogram files (`native-histograms/histogram_<id>.native`, the
//! companions of histogram `*.db` files) in `multiprom inspect`: listed
//! after a directory's `*.db` files, one row per series (with `--json`,
//! one line per series, its buckets included).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use multiprom_format::native_file::{
    db_name_of_native_histogram_file, NATIVE_HISTOGRAM_DIR, NATIVE_HISTOGRAM_SUFFIX,
};
use multiprom_format::{
    float_to_go_string, read_native_histogram_file, Key, NativeHistogramFile, ReadError,
};

use serde::Serialize;

use super::{label_value, printable, visible, JsonFloat, JsonLine};

/// Whether `path` names a native histogram file.
pub(super) fn is_native(path: &Path) -> bool {
    path.extension().is_some_and(|e| {
        Some(e.to_string_lossy().as_ref()) == NATIVE_HISTOGRAM_SUFFIX.strip_prefix('.')
    })
}

/// The native histogram files of directory `dir`, in name order (none if it
/// has no `native-histograms/`).
pub(super) fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join(NATIVE_HISTOGRAM_DIR)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_native(p))
        .collect();
    files.sort();
    files
}

/// What was read from one native histogram file.
pub(super) struct InspectedNative {
    path: PathBuf,
    read: Result<NativeHistogramFile, ReadError>,
}

impl InspectedNative {
    pub(super) fn read(path: &Path) -> InspectedNative {
        InspectedNative {
            path: path.to_owned(),
            read: read_native_histogram_file(path),
        }
    }

    /// Why it cannot be read, unless it vanished meanwhile.
    pub(super) fn problem(&self) -> Option<&ReadError> {
        self.read.as_ref().err().filter(|e| !e.is_vanished())
    }

    /// `--check`: the problem, if any.
    pub(super) fn write_check(&self, out: &mut impl Write) -> io::Result<()> {
        match self.problem() {
            Some(problem) => writeln!(out, "{problem}"),
            None => Ok(()),
        }
    }

    /// The table: a header line, then per series its schema, count, sum,
    /// zero bucket and number of buckets.
    pub(super) fn write_table(&self, out: &mut impl Write) -> io::Result<()> {
        let path = printable(&self.path.to_string_lossy());
        let of = self
            .path
            .file_name()
            .and_then(|n| db_name_of_native_histogram_file(&n.to_string_lossy()))
            .map_or_else(
                || "not a native histogram file name".to_owned(),
                |db| format!("of {}", printable(&db.to_string())),
            );
        let file = match &self.read {
            Ok(file) => file,
            Err(e) => {
                writeln!(out, "{path}: native histograms {of}, not readable")?;
                return writeln!(out, "  problem: offset {}: {}", e.offset, e.kind);
            }
        };
        let n = file.entries.len();
        writeln!(out, "{path}: native histograms {of}, {n} series")?;
        if n == 0 {
            return Ok(());
        }
        let mut rows: Vec<[String; 7]> = vec![[
            "FAMILY",
            "LABELS",
            "SCHEMA",
            "COUNT",
            "SUM",
            "ZERO BUCKET",
            "BUCKETS",
        ]
        .map(str::to_owned)];
        for entry in &file.entries {
            let h = &entry.histogram;
            let (family, labels) = match Key::decode(entry.raw_key.as_bytes()) {
                Ok(key) => (visible(&key.family), labels_cell(&key.labels)),
                Err(_) => (printable(&entry.raw_key), "?".to_owned()),
            };
            rows.push([
                family,
                labels,
                h.schema.to_string(),
                h.count().to_string(),
                float_to_go_string(h.sum),
                format!(
                    "{} (|x| <= {})",
                    h.zero_count,
                    float_to_go_string(h.zero_threshold)
                ),
                h.bucket_count().to_string(),
            ]);
        }
        super::write_rows(out, &rows)
    }
}

/// What a native histogram series holds, in `--json`: `native_histogram`
/// where a `*.db` entry has `value` and `timestamp`.
#[derive(Serialize)]
struct JsonSeries {
    native_histogram: JsonHistogram,
}

/// A native histogram in `--json`: each side's buckets as `[index, count]`
/// pairs by index (bucket `i` holds the absolute values in
/// `(2^((i-1)·2^-schema), 2^(i·2^-schema)]`).
#[derive(Serialize)]
struct JsonHistogram {
    schema: i8,
    zero_threshold: JsonFloat,
    zero_count: u64,
    nan_count: u64,
    count: u64,
    sum: JsonFloat,
    positive: Vec<(i32, u64)>,
    negative: Vec<(i32, u64)>,
}

impl InspectedNative {
    /// `--json`: one line per series. A problem goes to stderr, as a `*.db`
    /// file's does; so does a series whose key is not a `*.db` key (the
    /// collector serves no such series).
    pub(super) fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        let file = match &self.read {
            Ok(file) => file,
            Err(e) => {
                if !e.is_vanished() {
                    eprintln!("{e}");
                }
                return Ok(());
            }
        };
        let path = self.path.to_string_lossy();
        for entry in &file.entries {
            let key = match Key::decode(entry.raw_key.as_bytes()) {
                Ok(key) => key,
                Err(e) => {
                    eprintln!("{}: offset {}: {e}", printable(&path), entry.offset);
                    continue;
                }
            };
            let mut h = entry.histogram.clone();
            h.sort_buckets();
            let holds = JsonSeries {
                native_histogram: JsonHistogram {
                    schema: h.schema,
                    zero_threshold: h.zero_threshold.into(),
                    zero_count: h.zero_count,
                    nan_count: h.nan_count,
                    count: h.count(),
                    sum: h.sum.into(),
                    positive: h.positive,
                    negative: h.negative,
                },
            };
            JsonLine::new(&path, entry.offset, &key, holds).write(out)?;
        }
        Ok(())
    }
}

fn labels_cell(labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return "-".to_owned();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{}=\"{}\"", printable(k), label_value(v)))
        .collect::<Vec<_>>()
        .join(",")
}
