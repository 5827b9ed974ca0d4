//! multiprom-format against the real `prometheus_client`, in real processes.
//!
//! * Python writes (forked workers, every type and gauge mode, hostile strings),
//!   Rust reads: every entry equal to what Python's own reader returns.
//! * Rust writes, Python reads (`MmapedDict`, `MultiProcessCollector`): every
//!   entry equal, every key byte-identical to Python's `mmap_key()`.
//! * Reopening: Python continues a Rust-written file and Rust a Python-written
//!   one, with no duplicate entries and values carried on.
//! * Bulk: key encoding on 100,000 random inputs and `float_to_go_string` on
//!   over 1,000,000 values, each checked against Python in one process.
//!
//! Values cross the language boundary as the hex of their little-endian bytes,
//! so NaN, -0.0 and subnormals compare bit for bit.

// Test helpers outside `#[test]` functions: a panic is a failing test.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use multiprom_format::{
    encode_key, float_to_go_string, layout, read_file, FileContents, FileName, FileWriter,
    GaugeMode, Key, MetricKind,
};
use serde_json::Value;

use crate::harness::{run_python, temp_dir};
mod bulk;
mod reopen;

/// Mirrors `TRICKY` in tests/python/format_common.py (test `a` checks they agree).
const TRICKY: [&str; 10] = [
    "",
    "plain",
    "quote \" backslash \\ slash / both \\\"",
    "newline \n tab \t cr \r backspace \u{8} formfeed \u{c}",
    "controls \u{0}\u{1}\u{2}\u{3}\u{4}\u{5}\u{6}\u{7}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{e}\u{f}\
     \u{10}\u{11}\u{12}\u{13}\u{14}\u{15}\u{16}\u{17}\u{18}\u{19}\u{1a}\u{1b}\u{1c}\u{1d}\u{1e}\u{1f}",
    "DEL \u{7f} C1 \u{80} \u{9f} NBSP \u{a0}",
    "U+2028 \u{2028} U+2029 \u{2029} BOM \u{feff} U+FFFE \u{fffe} U+FFFF \u{ffff}",
    "astral \u{1F600} \u{1D11E} \u{20000} \u{E0001} \u{10FFFF}",
    "mixed \u{fc}n\u{ef}c\u{f8}d\u{e9} \u{65e5}\u{672c}\u{8a9e} \u{627}\u{644}\u{639}\u{631}\u{628}\u{64a}\u{629}",
    "{\"looks\": [\"like\", \"json\"]}, \\u0041 not an escape",
];

/// Mirrors `TRICKY_HELP` in tests/python/format_common.py.
const TRICKY_HELP: &str = "Help with \"quotes\", \\backslashes\\, a newline\nand U+2028 \u{2028}, \
                           NUL \0, DEL \u{7f}, emoji \u{1F600} and \u{1D11E}";

const MULTIPROC_ENV: &str = "PROMETHEUS_MULTIPROC_DIR";

// ---------------------------------------------------------------------------
// Shared plumbing

fn f64_hex(v: f64) -> String {
    v.to_le_bytes().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn hex_f64(hex: &str) -> f64 {
    assert_eq!(hex.len(), 16, "bad f64 hex {hex:?}");
    let mut bytes = [0u8; 8];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    f64::from_le_bytes(bytes)
}

/// One entry as Python's `MmapedDict.read_all_values_from_file` yields it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PyEntry {
    key: String,
    value_bits: u64,
    timestamp_bits: u64,
    /// Python's `pos`: the offset of the value.
    pos: u64,
}

/// `{file name: entries}` from `format_common.dump_dir`.
fn py_files(v: &Value) -> BTreeMap<String, Vec<PyEntry>> {
    v.as_object()
        .expect("files object")
        .iter()
        .map(|(name, file)| {
            let entries = file["entries"]
                .as_array()
                .expect("entries array")
                .iter()
                .map(|e| PyEntry {
                    key: e[0].as_str().unwrap().to_owned(),
                    value_bits: hex_f64(e[1].as_str().unwrap()).to_bits(),
                    timestamp_bits: hex_f64(e[2].as_str().unwrap()).to_bits(),
                    pos: e[3].as_u64().unwrap(),
                })
                .collect();
            (name.clone(), entries)
        })
        .collect()
}

fn db_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".db"))
        .collect()
}

/// Rust's `read_file` must return exactly the entries Python's reader returns,
/// for every `*.db` file in `dir`.
fn assert_rust_reads_like_python(
    dir: &Path,
    python: &BTreeMap<String, Vec<PyEntry>>,
) -> BTreeMap<String, FileContents> {
    let names = db_files(dir);
    assert_eq!(
        names,
        python.keys().cloned().collect::<BTreeSet<_>>(),
        "Python and Rust see different files"
    );
    let mut out = BTreeMap::new();
    for (name, py_entries) in python {
        FileName::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let path = dir.join(name);
        let contents = read_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            contents.header.file_size,
            std::fs::metadata(&path).unwrap().len()
        );
        let rust_entries: Vec<PyEntry> = contents
            .entries
            .iter()
            .map(|e| PyEntry {
                key: e.raw_key.clone(),
                value_bits: e.value.to_bits(),
                timestamp_bits: e.timestamp.to_bits(),
                pos: e.value_offset(),
            })
            .collect();
        assert_eq!(
            rust_entries.len(),
            py_entries.len(),
            "{name}: entry count differs"
        );
        for (i, (rust, py)) in rust_entries.iter().zip(py_entries).enumerate() {
            assert_eq!(
                rust, py,
                "{name}: entry {i} differs (left Rust, right Python)"
            );
        }
        out.insert(name.clone(), contents);
    }
    out
}

fn parse_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "helper printed invalid JSON ({e}): {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(2000)])
        )
    })
}

/// SplitMix64: a small seeded generator, so every run checks the same inputs
/// and a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn range_i64(&mut self, lo: i64, hi_inclusive: i64) -> i64 {
        lo + self.below((hi_inclusive - lo) as u64 + 1) as i64
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

// ---------------------------------------------------------------------------
// a. Python writes, Rust reads

#[test]
fn python_written_files_read_by_rust() {
    let dir = temp_dir();
    let out = run_python(
        "format_python_writes.py",
        &[],
        &[(MULTIPROC_ENV, dir.path())],
    );
    let v = parse_json(&out);
    // The Rust mirrors of the hostile strings must be the very strings Python used.
    let py_tricky: Vec<&str> = v["tricky"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(py_tricky, TRICKY);
    assert_eq!(v["tricky_help"].as_str().unwrap(), TRICKY_HELP);

    let python = py_files(&v["files"]);
    let contents = assert_rust_reads_like_python(dir.path(), &python);

    // Every key Python wrote is re-encoded by Rust to the same bytes.
    let mut label_values = BTreeSet::new();
    let mut helps = BTreeSet::new();
    for (name, file) in &contents {
        for entry in &file.entries {
            assert_eq!(entry.key.encode(), entry.raw_key, "{name}");
            label_values.extend(entry.key.labels.iter().map(|(_, v)| v.clone()));
            helps.insert(entry.key.help.clone());
        }
    }

    // The run covered what it claims to cover.
    let child_ids: Vec<String> = v["child_pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap().to_string())
        .collect();
    assert_eq!(child_ids.len(), 3);
    let mut kinds = vec![
        MetricKind::Counter,
        MetricKind::Histogram,
        MetricKind::Summary,
    ];
    kinds.extend(GaugeMode::ALL.map(MetricKind::Gauge));
    for id in &child_ids {
        for &kind in &kinds {
            let name = FileName::new(kind, id.as_str()).unwrap().to_string();
            let file = contents
                .get(&name)
                .unwrap_or_else(|| panic!("forked worker wrote no {name}"));
            assert!(!file.entries.is_empty(), "{name} has no entries");
        }
    }
    for t in TRICKY {
        assert!(label_values.contains(t), "no label value {t:?}");
    }
    assert!(helps.contains(TRICKY_HELP));
    let all_entries = || contents.values().flat_map(|c| &c.entries);
    assert!(
        contents
            .values()
            .any(|c| c.header.file_size > layout::INITIAL_CAPACITY),
        "no Python file grew past 64 KiB"
    );
    assert!(all_entries().any(|e| e.value.is_nan()));
    assert!(all_entries().any(|e| e.value == f64::NEG_INFINITY));
    assert!(all_entries().any(|e| e.value.to_bits() == (-0.0f64).to_bits()));
    assert!(all_entries().any(|e| e.key.family == "interop_\u{fc}n\u{ef}_\u{1F600}"));
    assert!(all_entries().any(|e| e.key.labels.iter().any(|(_, v)| v == "1e+06")));
    // mostrecent gauges carry real timestamps.
    let name = FileName::new(
        MetricKind::Gauge(GaugeMode::MostRecent),
        child_ids[0].as_str(),
    )
    .unwrap()
    .to_string();
    assert!(contents[&name].entries.iter().all(|e| e.timestamp > 1.0e9));
}

// ---------------------------------------------------------------------------
// b. Rust writes, Python reads

/// One entry the Rust writer wrote, with the inputs it encoded.
#[derive(Debug, Clone)]
struct Written {
    file: String,
    id: String,
    kind: MetricKind,
    family: String,
    sample: String,
    /// In the order given to the encoder (not sorted).
    labels: Vec<(String, String)>,
    help: String,
    key: String,
    value: f64,
    timestamp: f64,
    value_offset: u64,
}

struct SpecWriter<'a> {
    writer: FileWriter,
    file: String,
    id: String,
    kind: MetricKind,
    log: &'a mut Vec<Written>,
}

impl SpecWriter<'_> {
    fn put(
        &mut self,
        family: &str,
        sample: &str,
        labels: &[(&str, &str)],
        help: &str,
        value: f64,
        timestamp: f64,
    ) {
        let key = encode_key(family, sample, labels.iter().copied(), help);
        let offset = self.writer.used();
        let slot = self.writer.slot(&key).unwrap();
        assert_eq!(
            self.writer.used(),
            offset + layout::entry_len(key.len()),
            "key written twice: {key}"
        );
        slot.set_with_timestamp(value, timestamp);
        let value_offset = layout::value_offset(offset, key.len()) as u64;
        self.log.push(Written {
            file: self.file.clone(),
            id: self.id.clone(),
            kind: self.kind,
            family: family.into(),
            sample: sample.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            help: help.into(),
            key,
            value,
            timestamp,
            value_offset,
        });
    }
}

const SPECIAL: [f64; 10] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -0.0,
    5e-324,
    f64::MIN_POSITIVE,
    f64::MAX,
    0.1,
    -1e-300,
    123_456_789.125,
];

const BUCKETS: [f64; 7] = [0.005, 0.1, 1.0, 2.5, 1e6, 1.5e7, f64::INFINITY];

/// Writes one file of every kind for each id; returns what was written.
fn write_rust_files(dir: &Path, ids: &[&str]) -> Vec<Written> {
    let mut log = Vec::new();
    let mut kinds = vec![
        MetricKind::Counter,
        MetricKind::Histogram,
        MetricKind::Summary,
    ];
    kinds.extend(GaugeMode::ALL.map(MetricKind::Gauge));
    let umlaut_emoji = "l\u{e4}bel_\u{1F600}";
    for (n, id) in ids.iter().enumerate() {
        let bump = n as f64;
        for &kind in &kinds {
            let name = FileName::new(kind, *id).unwrap();
            let mut w = SpecWriter {
                writer: FileWriter::open(dir, &name).unwrap(),
                file: name.to_string(),
                id: (*id).to_owned(),
                kind,
                log: &mut log,
            };
            for (i, t) in TRICKY.iter().enumerate() {
                let reversed: String = t.chars().rev().collect();
                let fi = i as f64;
                match kind {
                    MetricKind::Counter => w.put(
                        "rs_requests",
                        "rs_requests_total",
                        &[("zeta", t), (umlaut_emoji, &reversed), ("alpha", "a")],
                        TRICKY_HELP,
                        (fi + 1.0) * 1.5 + bump,
                        0.0,
                    ),
                    MetricKind::Histogram => {
                        w.put(
                            "rs_latency",
                            "rs_latency_sum",
                            &[("zeta", t)],
                            TRICKY_HELP,
                            fi * 0.25 + bump,
                            0.0,
                        );
                        for (b, bound) in BUCKETS.iter().enumerate() {
                            let le = float_to_go_string(*bound);
                            w.put(
                                "rs_latency",
                                "rs_latency_bucket",
                                &[("zeta", t), ("le", &le)],
                                TRICKY_HELP,
                                (i + b) as f64 + bump,
                                0.0,
                            );
                        }
                    }
                    MetricKind::Summary => {
                        w.put("rs_size", "rs_size_count", &[("tricky", t)], t, fi, 0.0);
                        w.put("rs_size", "rs_size_sum", &[("tricky", t)], t, fi * 3.5, 0.0);
                    }
                    MetricKind::Gauge(mode) => {
                        let family = format!("rs_gauge_{mode}");
                        let value = SPECIAL[(i + n) % SPECIAL.len()];
                        let timestamp =
                            if matches!(mode, GaugeMode::MostRecent | GaugeMode::LiveMostRecent) {
                                1.7e9 + fi
                            } else {
                                0.0
                            };
                        w.put(
                            &family,
                            &family,
                            &[("tricky", t), (umlaut_emoji, "\u{2028}")],
                            TRICKY_HELP,
                            value,
                            timestamp,
                        );
                    }
                }
            }
            if kind == MetricKind::Counter && n == 0 {
                // Grow the first counter file past 64 KiB (twice).
                for i in 0..2000 {
                    let label = format!("series {i} {}", TRICKY[i % TRICKY.len()]);
                    w.put(
                        "rs_filler",
                        "rs_filler_total",
                        &[("series", &label)],
                        "Filler",
                        i as f64,
                        0.0,
                    );
                }
                assert!(w.writer.capacity() >= 4 * layout::INITIAL_CAPACITY);
                assert_eq!(
                    std::fs::metadata(w.writer.path()).unwrap().len(),
                    w.writer.capacity()
                );
            }
        }
    }
    log
}

fn sorted_labels(labels: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut v: Vec<_> = labels.into_iter().collect();
    v.sort();
    v
}

/// `(sample, labels, value bits, timestamp bits)` from a helper's metric JSON.
type PySample = (String, Vec<(String, String)>, u64, Option<u64>);

fn py_samples(metric: &Value) -> Vec<PySample> {
    let mut out: Vec<PySample> = metric["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let labels = s[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|kv| {
                    (
                        kv[0].as_str().unwrap().to_owned(),
                        kv[1].as_str().unwrap().to_owned(),
                    )
                })
                .collect::<Vec<_>>();
            (
                s[0].as_str().unwrap().to_owned(),
                sorted_labels(labels),
                hex_f64(s[2].as_str().unwrap()).to_bits(),
                s[3].as_str().map(|h| hex_f64(h).to_bits()),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn rust_written_files_read_by_python() {
    let dir = temp_dir();
    let written = write_rust_files(dir.path(), &["101", "102"]);

    let spec = serde_json::json!({
        "keys": written
            .iter()
            .map(|w| {
                let names: Vec<&str> = w.labels.iter().map(|(k, _)| k.as_str()).collect();
                let values: Vec<&str> = w.labels.iter().map(|(_, v)| v.as_str()).collect();
                serde_json::json!([w.family, w.sample, names, values, w.help])
            })
            .collect::<Vec<_>>(),
    });
    let spec_path = dir.path().join("spec.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec).unwrap()).unwrap();
    let out = run_python(
        "format_python_reads.py",
        &[dir.path().to_str().unwrap(), spec_path.to_str().unwrap()],
        &[],
    );
    let v = parse_json(&out);

    // Keys: byte-identical to Python's mmap_key() for the same inputs.
    let mmap_keys = v["mmap_keys"].as_array().unwrap();
    assert_eq!(mmap_keys.len(), written.len());
    for (w, py_key) in written.iter().zip(mmap_keys) {
        assert_eq!(w.key, py_key.as_str().unwrap(), "key for {w:?}");
    }

    // MmapedDict.read_all_values_from_file: every entry, value, timestamp, offset.
    let python = py_files(&v["files"]);
    let mut expected: BTreeMap<String, Vec<PyEntry>> = BTreeMap::new();
    for w in &written {
        expected.entry(w.file.clone()).or_default().push(PyEntry {
            key: w.key.clone(),
            value_bits: w.value.to_bits(),
            timestamp_bits: w.timestamp.to_bits(),
            pos: w.value_offset,
        });
    }
    assert_eq!(
        python.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (name, want) in &expected {
        let got = &python[name];
        assert_eq!(got.len(), want.len(), "{name}: entry count");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g, w, "{name}: entry {i} (left Python, right Rust)");
        }
    }
    // And Rust's own reader agrees with Python's.
    assert_rust_reads_like_python(dir.path(), &python);

    // MultiProcessCollector's per-file view: one sample per entry, gauges
    // with the id as `pid`, values and timestamps exact.
    let mut want_metrics: BTreeMap<String, (String, String, Vec<PySample>)> = BTreeMap::new();
    for w in &written {
        // (No repeated label names here: the key test covers those.)
        let mut labels = w.labels.clone();
        let is_gauge = matches!(w.kind, MetricKind::Gauge(_));
        if is_gauge {
            labels.push(("pid".into(), w.id.clone()));
        }
        let entry = want_metrics
            .entry(w.family.clone())
            .or_insert_with(|| (w.kind.type_name().to_owned(), w.help.clone(), Vec::new()));
        entry.2.push((
            w.sample.clone(),
            sorted_labels(labels),
            w.value.to_bits(),
            is_gauge.then(|| w.timestamp.to_bits()),
        ));
    }
    let mut got_metrics = BTreeMap::new();
    for m in v["read_metrics"].as_array().unwrap() {
        got_metrics.insert(
            m["name"].as_str().unwrap().to_owned(),
            (
                m["type"].as_str().unwrap().to_owned(),
                m["help"].as_str().unwrap().to_owned(),
                py_samples(m),
            ),
        );
    }
    assert_eq!(
        got_metrics.keys().collect::<Vec<_>>(),
        want_metrics.keys().collect::<Vec<_>>()
    );
    for (family, (typ, help, samples)) in &mut want_metrics {
        samples.sort();
        let (got_typ, got_help, got_samples) = &got_metrics[family];
        assert_eq!((got_typ, got_help), (&*typ, &*help), "{family}");
        if family == "rs_size" {
            // Help differs per entry there; Python keeps the first one it reads.
            assert!(TRICKY.contains(&got_help.as_str()));
        }
        assert_eq!(got_samples.len(), samples.len(), "{family}: sample count");
        for (g, w) in got_samples.iter().zip(samples.iter()) {
            assert_eq!(g, w, "{family} (left Python, right Rust)");
        }
    }

    // The merged scrape worked and sums across the two processes' files.
    assert!(v["exposition_bytes"].as_u64().unwrap() > 1000);
    let merged: BTreeMap<String, Vec<PySample>> = v["merged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_owned(), py_samples(m)))
        .collect();
    let requests = &merged["rs_requests"];
    assert_eq!(requests.len(), TRICKY.len());
    for (i, t) in TRICKY.iter().enumerate() {
        let reversed: String = t.chars().rev().collect();
        let labels = sorted_labels([
            ("zeta".to_owned(), (*t).to_owned()),
            ("l\u{e4}bel_\u{1F600}".to_owned(), reversed),
            ("alpha".to_owned(), "a".to_owned()),
        ]);
        let fi = i as f64;
        let want = ((fi + 1.0) * 1.5) + ((fi + 1.0) * 1.5 + 1.0);
        assert!(
            requests
                .iter()
                .any(|s| s.0 == "rs_requests_total" && s.1 == labels && s.2 == want.to_bits()),
            "merged rs_requests_total{{{labels:?}}} != {want}: {requests:?}"
        );
    }
    let latency = &merged["rs_latency"];
    for (i, t) in TRICKY.iter().enumerate() {
        let count: f64 = (0..BUCKETS.len()).map(|b| 2.0 * (i + b) as f64 + 1.0).sum();
        let labels = vec![("zeta".to_owned(), (*t).to_owned())];
        assert!(
            latency
                .iter()
                .any(|s| s.0 == "rs_latency_count" && s.1 == labels && s.2 == count.to_bits()),
            "merged rs_latency_count{{zeta={t:?}}} != {count}"
        );
    }
}
