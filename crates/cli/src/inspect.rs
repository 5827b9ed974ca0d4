//! `multiprom inspect`: show or check the contents of `*.db` files, and of
//! the native histogram files beside them.
//!
//! Files are read with `pread` (never mapped), so inspecting files that
//! workers are writing right now is safe, and entry by entry, so a damaged
//! file costs no more than its good entries. Whether a file is good is decided
//! by the collector itself ([`merge_files`]), so `--check` flags exactly the
//! files a scrape would skip.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use multiprom_collector::{merge_files, scan_dir, CollectOptions};
use multiprom_format::{
    float_to_go_string, read_valid_prefix, FileName, Header, Key, MetricKind, ReadError,
};
use serde::Serialize;

use crate::exit_code::ExitCode;

mod native;
mod sniff;

/// Arguments of `multiprom inspect`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Exit status: 0 if every file is good, 1 if any file is bad (damaged, foreign, or skipped \
by a scrape for another reason), 2 if a PATH does not exist.")]
pub(crate) struct Args {
    /// One JSON object per entry (JSON Lines): file, offset, family, sample,
    /// labels, help, value, timestamp; per native histogram series the same
    /// with native_histogram in place of value and timestamp.
    #[arg(long, conflicts_with = "check")]
    pub json: bool,
    /// Only validate: print each problem as `path: offset N: reason`.
    #[arg(long)]
    pub check: bool,
    /// Files, or directories (their *.db files, then their
    /// native-histograms/*.native files, in name order). Native histogram
    /// files are shown per series.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,
}

/// One entry read from a file.
#[derive(Debug)]
struct InspectedEntry {
    offset: u64,
    key: Key,
    value: f64,
    timestamp: f64,
}

/// What was read from one file.
#[derive(Debug)]
struct Inspected {
    path: PathBuf,
    name: Option<FileName>,
    header: Option<Header>,
    /// Entries up to the first damaged one.
    entries: Vec<InspectedEntry>,
    /// The collector's verdict: why a scrape would skip this file.
    problem: Option<ReadError>,
}

impl Inspected {
    fn is_bad(&self) -> bool {
        self.problem.as_ref().is_some_and(|p| !p.is_vanished())
    }
}

fn inspect_file(path: &Path) -> Inspected {
    // As the collector reads names: bytes that are not UTF-8 become U+FFFD.
    let name = path
        .file_name()
        .and_then(|n| FileName::parse(&n.to_string_lossy()).ok());
    let mut inspected = Inspected {
        path: path.to_path_buf(),
        name,
        header: None,
        entries: Vec::new(),
        problem: None,
    };
    // Entries are checked as they are read and reading stops at the first
    // bad one, so a header claiming gigabytes in use over a sparse file
    // costs one small read. What stopped the reading is the collector's to
    // say, below.
    if let Ok(prefix) = read_valid_prefix(path) {
        inspected.header = Some(prefix.header);
        inspected.entries = prefix
            .entries
            .into_iter()
            .map(|entry| InspectedEntry {
                offset: entry.offset,
                key: entry.key,
                value: entry.value,
                timestamp: entry.timestamp,
            })
            .collect();
    }
    inspected.problem = merge_files([path], CollectOptions::default())
        .files
        .iter()
        .find_map(|report| report.problem.clone());
    inspected
}

/// Expands directories to their `*.db` files and their native histogram
/// files; reports missing paths.
fn expand(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>, bool) {
    let mut files = Vec::new();
    let mut natives = Vec::new();
    let mut missing = false;
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => match scan_dir(path) {
                Ok(found) if found.is_empty() => {
                    natives.extend(native::files_in(path));
                    eprintln!("multiprom inspect: {}: no *.db files", path.display());
                }
                Ok(mut found) => {
                    // For people: name order (the merge takes listing order).
                    found.sort();
                    files.extend(found);
                    natives.extend(native::files_in(path));
                }
                Err(err) => {
                    eprintln!("multiprom inspect: {}: cannot list: {err}", path.display());
                    missing = true;
                }
            },
            Ok(_) if native::is_native(path) => natives.push(path.clone()),
            Ok(_) => files.push(path.clone()),
            // A dangling symlink still names something a scrape would see.
            Err(_) if std::fs::symlink_metadata(path).is_ok() => files.push(path.clone()),
            Err(err) => {
                eprintln!("multiprom inspect: {}: {err}", path.display());
                missing = true;
            }
        }
    }
    (files, natives, missing)
}

/// Runs `multiprom inspect`.
pub(crate) fn main(args: Args) -> ExitCode {
    let (files, natives, missing) = expand(&args.paths);
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut any_bad = false;
    let mut first = true;
    for path in &files {
        let inspected = inspect_file(path);
        any_bad |= inspected.is_bad();
        let written = if args.check {
            write_check(&mut out, &inspected)
        } else if args.json {
            write_json(&mut out, &inspected)
        } else {
            let separator = if first { Ok(()) } else { writeln!(out) };
            first = false;
            separator.and_then(|()| write_table(&mut out, &inspected))
        };
        if let Err(err) = written.and_then(|()| out.flush()) {
            return write_failed(&err);
        }
        if args.json {
            if let Some(problem) = &inspected.problem {
                eprintln!("{problem}");
            }
        }
    }
    for path in &natives {
        let inspected = native::InspectedNative::read(path);
        any_bad |= inspected.problem().is_some();
        let written = if args.check {
            inspected.write_check(&mut out)
        } else if args.json {
            inspected.write_json(&mut out)
        } else {
            let separator = if first { Ok(()) } else { writeln!(out) };
            first = false;
            separator.and_then(|()| inspected.write_table(&mut out))
        };
        if let Err(err) = written.and_then(|()| out.flush()) {
            return write_failed(&err);
        }
    }
    if let Err(err) = out.flush() {
        return write_failed(&err);
    }
    if missing {
        ExitCode::from(2)
    } else if any_bad {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A closed pipe (`| head`) ends the output quietly; anything else is an error.
fn write_failed(err: &io::Error) -> ExitCode {
    if err.kind() == io::ErrorKind::BrokenPipe {
        ExitCode::SUCCESS
    } else {
        eprintln!("multiprom inspect: cannot write output: {err}");
        ExitCode::FAILURE
    }
}

fn write_check(out: &mut impl Write, inspected: &Inspected) -> io::Result<()> {
    match &inspected.problem {
        Some(problem) if !problem.is_vanished() => writeln!(out, "{problem}"),
        _ => Ok(()),
    }
}

/// A JSON number when finite, else `"+Inf"`, `"-Inf"` or `"NaN"` (JSON has
/// no non-finite numbers).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum JsonFloat {
    Number(f64),
    Text(&'static str),
}

impl From<f64> for JsonFloat {
    fn from(v: f64) -> Self {
        if v.is_finite() {
            JsonFloat::Number(v)
        } else if v.is_nan() {
            JsonFloat::Text("NaN")
        } else if v > 0.0 {
            JsonFloat::Text("+Inf")
        } else {
            JsonFloat::Text("-Inf")
        }
    }
}

/// One `--json` line: where the entry is and its key, then what it holds
/// (`value` and `timestamp` for a `*.db` entry); fields in this order,
/// exactly these.
#[derive(Debug, Serialize)]
pub(super) struct JsonLine<'a, T> {
    file: &'a str,
    offset: u64,
    family: &'a str,
    sample: &'a str,
    labels: serde_json::Map<String, serde_json::Value>,
    help: &'a str,
    #[serde(flatten)]
    holds: T,
}

impl<'a, T: Serialize> JsonLine<'a, T> {
    pub(super) fn new(file: &'a str, offset: u64, key: &'a Key, holds: T) -> Self {
        JsonLine {
            file,
            offset,
            family: &key.family,
            sample: &key.sample,
            labels: key
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
            help: &key.help,
            holds,
        }
    }

    /// Writes the line, and its newline.
    pub(super) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        serde_json::to_writer(&mut *out, self).map_err(io::Error::from)?;
        out.write_all(b"\n")
    }
}

/// What a `*.db` entry holds, in `--json`.
#[derive(Debug, Serialize)]
struct JsonValue {
    value: JsonFloat,
    timestamp: JsonFloat,
}

fn write_json(out: &mut impl Write, inspected: &Inspected) -> io::Result<()> {
    let file = inspected.path.to_string_lossy();
    for entry in &inspected.entries {
        let holds = JsonValue {
            value: entry.value.into(),
            timestamp: entry.timestamp.into(),
        };
        JsonLine::new(&file, entry.offset, &entry.key, holds).write(out)?;
    }
    Ok(())
}

/// The header line: path, type, gauge mode, pid, entries, size, used.
fn header_line(inspected: &Inspected) -> String {
    let path = printable(&inspected.path.to_string_lossy());
    let mut line = format!("{path}: ");
    match &inspected.name {
        Some(name) => {
            match name.kind() {
                MetricKind::Gauge(mode) => line.push_str(&format!("gauge {mode}")),
                kind => line.push_str(kind.type_name()),
            }
            match name.pid() {
                Some(pid) if pid.to_string() == name.id() => line.push_str(&format!(", pid {pid}")),
                _ if name.id() == multiprom_format::COMPACTED_ID => line.push_str(
                    ", compacted: the values of exited workers, folded by multiprom --compact",
                ),
                _ => line.push_str(&format!(", id {}", printable(name.id()))),
            }
        }
        None => line.push_str("not a metrics file name"),
    }
    match inspected.header {
        Some(header) => {
            let percent = if header.file_size == 0 {
                0.0
            } else {
                header.used as f64 * 100.0 / header.file_size as f64
            };
            line.push_str(&format!(
                // Python sizes the file to the writer's capacity, so the two
                // are the same number; both are named because both matter.
                ", {} entr{}, used {} of {} bytes capacity ({percent:.1}%), file size {} bytes",
                inspected.entries.len(),
                if inspected.entries.len() == 1 {
                    "y"
                } else {
                    "ies"
                },
                header.used,
                header.file_size,
                header.file_size,
            ));
        }
        // The problem line below says why it cannot be read as a metrics
        // file; this says what it is instead.
        None => {
            let what = sniff::describe(&inspected.path);
            // Unknown binary under a metrics file name is most likely a
            // damaged metrics file: say that, the problem line says how.
            if inspected.name.is_some() && what == sniff::UNKNOWN_BINARY {
                line.push_str(", a damaged metrics file");
            } else {
                line.push_str(", not a readable metrics file: ");
                line.push_str(&what);
            }
        }
    }
    line
}

fn write_table(out: &mut impl Write, inspected: &Inspected) -> io::Result<()> {
    writeln!(out, "{}", header_line(inspected))?;
    if !inspected.entries.is_empty() {
        let mut rows: Vec<[String; 5]> = Vec::with_capacity(inspected.entries.len() + 1);
        rows.push(["FAMILY", "SAMPLE", "LABELS", "VALUE", "TIMESTAMP"].map(str::to_owned));
        for entry in &inspected.entries {
            let labels = if entry.key.labels.is_empty() {
                "-".to_owned()
            } else {
                entry
                    .key
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{}=\"{}\"", printable(k), label_value(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            rows.push([
                visible(&entry.key.family),
                visible(&entry.key.sample),
                labels,
                float_to_go_string(entry.value),
                format_timestamp(entry.timestamp),
            ]);
        }
        write_rows(out, &rows)?;
    }
    if let Some(problem) = &inspected.problem {
        writeln!(
            out,
            "  problem: offset {}: {}",
            problem.offset, problem.kind
        )?;
    }
    Ok(())
}

/// Rows as columns, each as wide as its widest cell, indented by two.
fn write_rows<const N: usize>(out: &mut impl Write, rows: &[[String; N]]) -> io::Result<()> {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from(" ");
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            line.push(' ');
            line.push_str(cell);
            if i + 1 < row.len() {
                line.push_str(&" ".repeat(width - cell.chars().count() + 1));
            }
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Text safe for a terminal: control characters (escape sequences!) are
/// shown escaped, everything else as is.
fn printable(text: &str) -> String {
    multiprom_format::printable(text).into_owned()
}

/// A name for the table: `""` when empty, so the column does not look blank.
fn visible(name: &str) -> String {
    if name.is_empty() {
        "\"\"".to_owned()
    } else {
        printable(name)
    }
}

/// A label value as the exposition formats escape it (`\\`, `\"`, `\n`),
/// then made terminal-safe.
fn label_value(value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    printable(&escaped)
}

/// `-` for 0 (never set), else the time in UTC with milliseconds.
fn format_timestamp(timestamp: f64) -> String {
    if timestamp == 0.0 {
        return "-".to_owned();
    }
    // Beyond ±10^11 s (year ~5000) a date says nothing useful.
    if !timestamp.is_finite() || timestamp.abs() > 1e11 {
        return float_to_go_string(timestamp);
    }
    let millis_total = (timestamp * 1000.0).round() as i64;
    let secs = millis_total.div_euclid(1000);
    let millis = millis_total.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let day_secs = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_in_utc() {
        assert_eq!(format_timestamp(0.0), "-");
        assert_eq!(format_timestamp(1.5), "1970-01-01T00:00:01.500Z");
        assert_eq!(
            format_timestamp(1_700_000_000.25),
            "2023-11-14T22:13:20.250Z"
        );
        assert_eq!(format_timestamp(951_782_400.0), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_timestamp(-1.0), "1969-12-31T23:59:59.000Z");
        assert_eq!(format_timestamp(f64::INFINITY), "+Inf");
        assert_eq!(format_timestamp(f64::NAN), "NaN");
        assert_eq!(format_timestamp(1e300), "1e+300");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain é"), "plain é");
        assert_eq!(printable("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
        assert_eq!(label_value("é\"\\\n\u{1b}"), "é\\\"\\\\\\n\\u{1b}");
        assert_eq!(visible(""), "\"\"");
    }

    #[test]
    fn json_floats() {
        let json = |v: f64| serde_json::to_string(&JsonFloat::from(v)).unwrap();
        assert_eq!(json(1.0), "1.0");
        assert_eq!(json(-0.5), "-0.5");
        assert_eq!(json(f64::INFINITY), "\"+Inf\"");
        assert_eq!(json(f64::NEG_INFINITY), "\"-Inf\"");
        assert_eq!(json(f64::NAN), "\"NaN\"");
    }
}
