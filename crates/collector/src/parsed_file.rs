//! One file's entries, parsed once per file lifetime.
//!
//! Files are append-only, so a file seen before is only parsed from where the
//! last parse stopped; its values are then read from the fresh bytes at
//! known offsets. A file replaced under the same name (new inode, or old
//! entries no longer byte-identical where they were) is parsed from scratch.

use std::path::Path;
use std::sync::Arc;

use multiprom_format::layout::HEADER_LEN;
use multiprom_format::{
    open_for_read, read_used_into_with_hint, EntryIter, FileIdentity, FileName, Header, Key,
    MetricKind, ReadErrorKind,
};

use crate::intern::{Interner, LabelTuple};
use crate::problem::{FileProblem, ProblemKind};

/// A histogram bucket entry: its labels without `le`, and `float(le)`.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pub without_le: LabelTuple,
    pub bound: f64,
}

/// One entry, with everything the merge needs precomputed.
#[derive(Debug, Clone)]
pub(crate) struct ParsedEntry {
    pub family: Arc<str>,
    pub help: Arc<str>,
    pub sample: Arc<str>,
    /// Python's label tuple: sorted key labels, plus `("pid", id)` for gauges.
    pub labels: LabelTuple,
    /// For gauges, `labels` without any `pid` (for modes that drop it).
    pub labels_no_pid: LabelTuple,
    /// For histogram files, entries with an `le` label.
    pub bucket: Option<Bucket>,
    offset: u32,
    value_offset: u32,
}

/// The parsed state of one file.
#[derive(Debug)]
pub(crate) struct ParsedFile {
    pub name: FileName,
    identity: Option<FileIdentity>,
    pub header: Header,
    parsed_up_to: usize,
    pub entries: Vec<ParsedEntry>,
    /// The bytes of every parsed entry except its value and timestamp, back
    /// to back: what must still be there for the parse to stay valid.
    frames: Vec<u8>,
    /// `(value, timestamp)` per entry, from the latest read.
    pub values: Vec<(f64, f64)>,
}

impl ParsedFile {
    pub(crate) fn new(name: FileName) -> Self {
        ParsedFile {
            name,
            identity: None,
            header: Header {
                used: 0,
                file_size: 0,
            },
            parsed_up_to: HEADER_LEN,
            entries: Vec::new(),
            frames: Vec::new(),
            values: Vec::new(),
        }
    }

    fn reset(&mut self) {
        self.parsed_up_to = HEADER_LEN;
        self.entries.clear();
        self.frames.clear();
    }

    /// Re-reads the file: parses new entries, refreshes every value. On error
    /// the parsed state is dropped (the file is re-parsed once it is good).
    /// Returns the number of bytes read.
    pub(crate) fn refresh(
        &mut self,
        path: &Path,
        buf: &mut Vec<u8>,
        interner: &mut Interner,
    ) -> Result<usize, FileProblem> {
        let result = self.refresh_inner(path, buf, interner);
        if result.is_err() {
            self.reset();
            self.identity = None;
            self.values.clear();
        }
        result
    }

    fn refresh_inner(
        &mut self,
        path: &Path,
        buf: &mut Vec<u8>,
        interner: &mut Interner,
    ) -> Result<usize, FileProblem> {
        let (file, meta) = open_for_read(path)?;
        let identity = FileIdentity {
            dev: std::os::unix::fs::MetadataExt::dev(&meta),
            ino: std::os::unix::fs::MetadataExt::ino(&meta),
        };
        let header = read_used_into_with_hint(&file, &meta, path, buf, self.header.used as usize)?;
        drop(file);
        let used = header.used as usize;
        if self.identity != Some(identity) || used < self.parsed_up_to || !self.prefix_matches(buf)
        {
            self.reset();
        }
        self.identity = Some(identity);
        self.header = header;
        let mut iter = EntryIter::new(buf, self.parsed_up_to, used);
        for raw in iter.by_ref() {
            let raw = raw.map_err(|e| e.at(path))?;
            let key = Key::decode(raw.key.as_bytes()).map_err(|e| FileProblem {
                path: path.to_path_buf(),
                offset: raw.offset,
                kind: ProblemKind::Read(ReadErrorKind::BadKey(e)),
            })?;
            let entry = self.parse_entry(path, raw.offset, raw.value_offset(), key, interner)?;
            let frame = buf
                .get(raw.offset as usize..raw.value_offset() as usize)
                .unwrap_or_default();
            self.frames.extend_from_slice(frame);
            self.entries.push(entry);
        }
        self.parsed_up_to = iter.position().max(self.parsed_up_to);
        self.values.clear();
        self.values.extend(self.entries.iter().map(|e| {
            let at = e.value_offset as usize;
            (read_f64(buf, at), read_f64(buf, at + 8))
        }));
        Ok(buf.len())
    }

    /// Whether every entry parsed before is still there byte for byte (its
    /// value aside). Files are append-only, so this only fails for a file
    /// rewritten in place (truncated and refilled under the same inode); a
    /// `memcmp` over the keys is far cheaper than decoding them again.
    fn prefix_matches(&self, buf: &[u8]) -> bool {
        let mut frames = self.frames.as_slice();
        self.entries.iter().all(|e| {
            let len = (e.value_offset - e.offset) as usize;
            let at = e.offset as usize;
            let (frame, rest) = frames.split_at(len.min(frames.len()));
            frames = rest;
            buf.get(at..at + len) == Some(frame)
        })
    }

    fn parse_entry(
        &self,
        path: &Path,
        offset: u64,
        value_offset: u64,
        key: Key,
        interner: &mut Interner,
    ) -> Result<ParsedEntry, FileProblem> {
        let problem = |kind| FileProblem {
            path: path.to_path_buf(),
            offset,
            kind,
        };
        if key.family.is_empty() {
            return Err(problem(ProblemKind::EmptyFamilyName));
        }
        let mut pairs: Vec<(Arc<str>, Arc<str>)> = key
            .labels
            .iter()
            .map(|(k, v)| (interner.string(k), interner.string(v)))
            .collect();
        let mut bucket = None;
        let (labels, labels_no_pid) = match self.name.kind() {
            MetricKind::Gauge(_) => {
                let no_pid: Vec<_> = pairs
                    .iter()
                    .filter(|(k, _)| &**k != "pid")
                    .cloned()
                    .collect();
                pairs.push((interner.string("pid"), interner.string(self.name.id())));
                let labels = interner.tuple(pairs);
                (labels, interner.tuple(no_pid))
            }
            MetricKind::Histogram => {
                if let Some((_, le)) = key.labels.iter().find(|(k, _)| k == "le") {
                    let bound = parse_python_float(le)
                        .filter(|b| !b.is_nan())
                        .ok_or_else(|| problem(ProblemKind::BadBucketBound(le.clone())))?;
                    let without: Vec<_> = pairs
                        .iter()
                        .filter(|(k, _)| &**k != "le")
                        .cloned()
                        .collect();
                    bucket = Some(Bucket {
                        without_le: interner.tuple(without),
                        bound,
                    });
                }
                let labels = interner.tuple(pairs);
                (labels.clone(), labels)
            }
            MetricKind::Counter | MetricKind::Summary => {
                let labels = interner.tuple(pairs);
                (labels.clone(), labels)
            }
        };
        Ok(ParsedEntry {
            family: interner.string(&key.family),
            help: interner.string(&key.help),
            sample: interner.string(&key.sample),
            labels,
            labels_no_pid,
            bucket,
            offset: offset as u32,
            value_offset: value_offset as u32,
        })
    }
}

fn read_f64(buf: &[u8], at: usize) -> f64 {
    buf.get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0.0, f64::from_ne_bytes)
}

/// Python's `float(str)`: surrounding whitespace allowed, `_` between digits,
/// `inf`/`infinity`/`nan` in any case with an optional sign.
///
/// One known difference: Python also accepts non-ASCII decimal digits
/// (`float('\u0661') == 1.0`); here they do not parse, so a histogram file
/// with such an `le` is reported as bad instead of merged. No writer makes
/// them (Python renders `le` with `floatToGoString`).
pub(crate) fn parse_python_float(s: &str) -> Option<f64> {
    let s = s.trim_matches(|c: char| c.is_whitespace());
    if s.contains('_') {
        let bytes = s.as_bytes();
        let ok = bytes.iter().enumerate().all(|(i, &b)| {
            b != b'_'
                || (i > 0
                    && i + 1 < bytes.len()
                    && bytes[i - 1].is_ascii_digit()
                    && bytes[i + 1].is_ascii_digit())
        });
        if !ok {
            return None;
        }
        return s.replace('_', "").parse().ok();
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_python_float;

    #[test]
    fn floats_parse_like_python() {
        assert_eq!(parse_python_float("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_python_float("-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_python_float(" 1_000.5 "), Some(1000.5));
        assert_eq!(parse_python_float("1e3"), Some(1000.0));
        assert_eq!(parse_python_float("1__0"), None);
        assert_eq!(parse_python_float("_1"), None);
        assert_eq!(parse_python_float("abc"), None);
        assert!(parse_python_float("nan").is_some_and(f64::is_nan));
    }
}
