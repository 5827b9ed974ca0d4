//! A directory of metrics files changed the ways writers, the application
//! and accidents change one, and the check that the parse cache never shows:
//! after every change, a long-lived [`DirCollector`] (whose cache has seen
//! every earlier state of every file) must say exactly what a fresh one and
//! [`merge_files`] say about the same bytes: the same families, the same
//! per-file reports. Some steps leave files out of the collection, as a
//! reaper does.
//!
//! Shared by the property test
//! `crates/collector/tests/integration/incremental_cache.rs` and, through
//! `#[path]`, the fuzz target `fuzz/fuzz_targets/parse_cache.rs`, so both
//! check the same thing; each generates the operations its own way. Only public APIs are used, so the
//! check holds whatever the cache looks like inside.
//!
//! File sizes stay small (offsets and lengths are kept below 64 KiB) so that
//! one sequence takes milliseconds; huge and sparse files are the fault
//! suite's business.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_collector::{
    merge_files, scan_dir, CollectOptions, DirCollector, MergedFamily, NameFilter, Scrape,
};
use multiprom_format::layout::{self, HEADER_LEN, INITIAL_CAPACITY};
use multiprom_format::{encode_key, parse_header, EntryIter, FileName};

/// The files operations pick from (by index, modulo the length): two files
/// of one kind (their samples add up), gauges in two modes (a mode conflict,
/// and `mostrecent` reads timestamps), and a histogram (buckets by `le`).
pub(crate) const FILE_NAMES: [&str; 5] = [
    "counter_1.db",
    "counter_2.db",
    "gauge_liveall_3.db",
    "gauge_mostrecent_4.db",
    "histogram_5.db",
];

/// Family names; the last, empty, makes its file bad. Shared by all files,
/// so one family can have several types and help texts (conflicts).
const FAMILIES: [&str; 4] = ["a", "b", "h", ""];
/// Sample name suffixes.
const SUFFIXES: [&str; 5] = ["", "_total", "_bucket", "_sum", "_count"];
const LABEL_NAMES: [&str; 4] = ["le", "pid", "x", "y"];
/// Label values, some of them bucket bounds only Python's `float()` reads;
/// the last two are no bucket bounds at all (a histogram file with
/// `le="abc"` is bad).
const LABEL_VALUES: [&str; 9] = [
    "+Inf",
    "0.5",
    "1",
    "-0.0",
    "0.0",
    " 1_0 ",
    "\u{e9}\u{1F600}",
    "nan",
    "abc",
];
/// Help texts; the last is long, so that a few entries pass the 4 KiB the
/// reader takes in its first `pread`.
const HELPS: [&str; 4] = ["", "Help.", "Other help.", LONG_HELP];
const LONG_HELP: &str = concat!(
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
    "A long help text. A long help text. A long help text. A long help text. ",
);

/// Lengths and offsets in operations are taken modulo this.
pub(crate) const MAX_LEN: u64 = 1 << 16;

/// An entry's key.
#[derive(Debug, Clone)]
pub(crate) enum KeySpec {
    /// A key Python could write, from the vocabulary above (indexes are
    /// taken modulo the list lengths).
    Named {
        /// Into the family names.
        family: usize,
        /// Into the sample name suffixes.
        suffix: usize,
        /// Into the label names and values.
        labels: Vec<(usize, usize)>,
        /// Into the help texts.
        help: usize,
    },
    /// Any bytes: mostly not a key at all, so the file turns bad.
    Raw(Vec<u8>),
}

impl KeySpec {
    fn bytes(&self) -> Vec<u8> {
        match self {
            KeySpec::Named {
                family,
                suffix,
                labels,
                help,
            } => {
                let family = FAMILIES[family % FAMILIES.len()];
                let sample = format!("{family}{}", SUFFIXES[suffix % SUFFIXES.len()]);
                let labels = labels.iter().map(|&(name, value)| {
                    (
                        LABEL_NAMES[name % LABEL_NAMES.len()],
                        LABEL_VALUES[value % LABEL_VALUES.len()],
                    )
                });
                encode_key(family, &sample, labels, HELPS[help % HELPS.len()]).into_bytes()
            }
            KeySpec::Raw(bytes) => bytes.clone(),
        }
    }
}

/// One entry to write.
#[derive(Debug, Clone)]
pub(crate) struct EntrySpec {
    /// The key.
    pub key: KeySpec,
    /// The value.
    pub value: f64,
    /// The timestamp.
    pub timestamp: f64,
}

/// One change to one file (`file` indexes [`FILE_NAMES`], modulo its length).
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// A writer adds entries: their bytes after `used`, then `used`, as
    /// Python does, doubling the file first if they do not fit. A missing
    /// file is created first, as Python creates it; a file whose header is
    /// not valid is written from offset 8.
    Append {
        /// Which file.
        file: usize,
        /// What to add.
        entries: Vec<EntrySpec>,
    },
    /// A writer updates an entry's value and timestamp in place (the
    /// `entry`-th, modulo the number of readable entries).
    SetValue {
        /// Which file.
        file: usize,
        /// Which entry.
        entry: usize,
        /// The new value.
        value: f64,
        /// The new timestamp.
        timestamp: f64,
    },
    /// Truncated to nothing and written again under the same inode: a
    /// reused pid's writer starting over, or `> file`.
    Rewrite {
        /// Which file.
        file: usize,
        /// The new contents.
        entries: Vec<EntrySpec>,
        /// Zero bytes after the used region.
        spare: u64,
    },
    /// A new file renamed over the name (a new inode).
    Replace {
        /// Which file.
        file: usize,
        /// The new contents.
        entries: Vec<EntrySpec>,
        /// Zero bytes after the used region.
        spare: u64,
    },
    /// Cut, or extended with zeros, to `len` bytes.
    Truncate {
        /// Which file.
        file: usize,
        /// The new length.
        len: u64,
    },
    /// Arbitrary bytes written at `offset`.
    Damage {
        /// Which file.
        file: usize,
        /// Where.
        offset: u64,
        /// What.
        bytes: Vec<u8>,
    },
    /// Removed (a reaped worker).
    Delete {
        /// Which file.
        file: usize,
    },
    /// Nothing changes on disk, but the next collections leave out the
    /// files whose bit is set in `files` (bit `i` for `FILE_NAMES[i]`), as
    /// a reaper does with the files of exited processes.
    LeaveOut {
        /// Which files.
        files: u8,
    },
}

impl Op {
    /// The paths in `dir` that the collections after this operation leave out.
    fn left_out(&self, dir: &Path) -> HashSet<PathBuf> {
        let Op::LeaveOut { files } = self else {
            return HashSet::new();
        };
        FILE_NAMES
            .iter()
            .enumerate()
            .filter(|&(i, _)| files >> i & 1 == 1)
            .map(|(_, name)| dir.join(name))
            .collect()
    }
}

fn entries_bytes(entries: &[EntrySpec]) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        layout::push_entry(&mut out, &entry.key.bytes(), entry.value, entry.timestamp);
    }
    out
}

fn image(entries: &[EntrySpec], spare: u64) -> Vec<u8> {
    let body = entries_bytes(entries);
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&((HEADER_LEN + body.len()) as i32).to_ne_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&body);
    out.resize(out.len() + (spare % MAX_LEN) as usize, 0);
    out
}

/// Where a writer would append: `used`, or 8 if the header is not valid.
fn append_offset(bytes: &[u8]) -> u64 {
    parse_header(bytes, bytes.len() as u64).map_or(HEADER_LEN as u64, |h| h.used)
}

fn file_name(file: usize) -> &'static str {
    FILE_NAMES[file % FILE_NAMES.len()]
}

/// Applies `op` to the files in `dir`.
pub(crate) fn apply(dir: &Path, op: &Op) -> io::Result<()> {
    let open = |file: usize| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(file_name(file)))
    };
    let exists = |file: usize| dir.join(file_name(file)).exists();
    match op {
        Op::Append { file, entries } => {
            let path = dir.join(file_name(*file));
            if !exists(*file) {
                let new = fs::File::create(&path)?;
                new.set_len(INITIAL_CAPACITY)?;
                new.write_at(&(HEADER_LEN as i32).to_ne_bytes(), 0)?;
            }
            let bytes = fs::read(&path)?;
            let at = append_offset(&bytes);
            let body = entries_bytes(entries);
            let used = at + body.len() as u64;
            let handle = open(*file)?;
            let mut capacity = (bytes.len() as u64).max(HEADER_LEN as u64);
            while capacity < used {
                capacity *= 2;
            }
            if capacity > bytes.len() as u64 {
                handle.set_len(capacity)?;
            }
            handle.write_at(&body, at)?;
            handle.write_at(&(used as i32).to_ne_bytes(), 0)?;
        }
        Op::SetValue {
            file,
            entry,
            value,
            timestamp,
        } => {
            if !exists(*file) {
                return Ok(());
            }
            let bytes = fs::read(dir.join(file_name(*file)))?;
            let used = append_offset(&bytes) as usize;
            let offsets: Vec<u64> = EntryIter::new(&bytes, HEADER_LEN, used)
                .map_while(Result::ok)
                .map(|e| e.value_offset())
                .collect();
            if let Some(at) = offsets.get(entry % offsets.len().max(1)) {
                let mut pair = value.to_ne_bytes().to_vec();
                pair.extend_from_slice(&timestamp.to_ne_bytes());
                open(*file)?.write_at(&pair, *at)?;
            }
        }
        Op::Rewrite {
            file,
            entries,
            spare,
        } => {
            let handle = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(dir.join(file_name(*file)))?;
            handle.write_at(&image(entries, *spare), 0)?;
        }
        Op::Replace {
            file,
            entries,
            spare,
        } => {
            // Not `*.db`: never listed while it is being written.
            let temporary = dir.join(".replacement");
            fs::write(&temporary, image(entries, *spare))?;
            fs::rename(&temporary, dir.join(file_name(*file)))?;
        }
        Op::Truncate { file, len } => {
            if exists(*file) {
                open(*file)?.set_len(len % MAX_LEN)?;
            }
        }
        Op::Damage {
            file,
            offset,
            bytes,
        } => {
            if exists(*file) {
                open(*file)?.write_at(bytes, offset % MAX_LEN)?;
            }
        }
        Op::Delete { file } => {
            if exists(*file) {
                fs::remove_file(dir.join(file_name(*file)))?;
            }
        }
        Op::LeaveOut { .. } => {}
    }
    Ok(())
}

/// Files [`pad`] adds: with the sequence's own, more than the 64 files from
/// which a collection reads ahead on other threads (on a machine with more
/// than one core). A fresh collection always reads every file, so the
/// reference collections go through the read-ahead, and so does every
/// collection of the long-lived one that reads that many files.
pub(crate) const PADDING_FILES: usize = 64;

/// Adds [`PADDING_FILES`] good counter files to `dir`, each with the same
/// one entry, in a family of its own (`pad_total`); the operations never
/// touch them, so whatever a collection says about them stays the same.
pub(crate) fn pad(dir: &Path) -> io::Result<()> {
    let entry = EntrySpec {
        key: KeySpec::Raw(
            encode_key("pad", "pad_total", [("of", "padding")], "Padding.").into_bytes(),
        ),
        value: 1.0,
        timestamp: 0.0,
    };
    let mut bytes = image(&[entry], 0);
    // As Python makes it: 64 KiB, zeros after the used bytes.
    bytes.resize(INITIAL_CAPACITY as usize, 0);
    for i in 0..PADDING_FILES {
        fs::write(dir.join(format!("counter_pad{i}.db")), &bytes)?;
    }
    Ok(())
}

/// What the long-lived collector is compared with after each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reference {
    /// A fresh `DirCollector` with maps turned off: a fresh merge of the
    /// same bytes at the least cost, which is what the fuzz target needs.
    /// (A fresh collector's one collection reads with `pread` and sets no
    /// directory watch with maps on too; this says so outright.)
    #[allow(dead_code)] // The fuzz target's choice; the property test takes the other.
    FreshReadingCollector,
    /// A fresh `DirCollector`, and `merge_files` over the same listing.
    FreshCollectorAndMergeFiles,
}

/// Applies `ops` to the files in the empty directory `dir` one by one; after
/// each, collects with one long-lived collector and panics unless it agrees
/// with the `reference` collections of the same directory.
pub(crate) fn check_sequence(
    dir: &Path,
    options: CollectOptions,
    reference: Reference,
    ops: &[Op],
) {
    // Every file's writer counts as gone: every file the operations leave
    // alone is settled, and each operation (which opens the file it changes)
    // must bring its file back.
    let long_lived =
        DirCollector::with_options(dir, options).settle_exited_writers(|_: &FileName| true);
    for (step, op) in ops.iter().enumerate() {
        apply(dir, op).unwrap_or_else(|e| panic!("step {step}: cannot apply {op:?}: {e}"));
        // One set for both of the long-lived collector's collections: the
        // second, on the same listing less the same files, is a quiet one.
        let leave_out = Arc::new(op.left_out(dir));
        let left_out = &*leave_out;
        let incremental = long_lived
            .collect_without(|_| Arc::clone(&leave_out), None)
            .expect("the directory lists");
        let fresh = DirCollector::with_options(dir, options)
            .map_files(reference != Reference::FreshReadingCollector)
            .collect_without(|_| Arc::new(left_out.clone()), None)
            .expect("the directory lists");
        let merged = (reference == Reference::FreshCollectorAndMergeFiles).then(|| {
            let mut paths = scan_dir(dir).expect("the directory lists");
            paths.retain(|path| !left_out.contains(path));
            merge_files(paths, options)
        });
        let references = [
            ("a fresh collector", Some(&*fresh)),
            ("merge_files", merged.as_ref()),
        ];
        for (what, expected) in references {
            let Some(expected) = expected else {
                continue;
            };
            if let Some(difference) = difference(&incremental, expected) {
                panic!(
                    "after step {step} ({op:?}) the long-lived collector disagrees with \
                     {what}: {difference}\nsteps: {ops:#?}"
                );
            }
        }
        // A filtered collection by the same collector keeps what the
        // filter keeps of the fresh collection, and nothing else.
        let filter = every_other_sample_name(&fresh);
        let filtered = long_lived
            .collect_without(|_| Arc::clone(&leave_out), Some(&filter))
            .expect("the directory lists");
        let want = filter.restrict(fresh.families.clone());
        if let Some(difference) = family_difference(&filtered.families, &want) {
            panic!(
                "after step {step} ({op:?}) the long-lived collector's collection of \
                 {filter:?} disagrees with the fresh one restricted: {difference}\n\
                 steps: {ops:#?}"
            );
        }
    }
}

/// A filter naming every other sample name of `scrape` (in sorted order),
/// and one it does not have.
fn every_other_sample_name(scrape: &Scrape) -> NameFilter {
    let names: std::collections::BTreeSet<&str> = scrape
        .families
        .iter()
        .flat_map(|f| f.samples.iter().map(|s| &*s.name))
        .collect();
    NameFilter::new(names.into_iter().step_by(2).chain(["no_such_sample_total"]))
}

/// How `got` differs from `want`, if it does: families (values compared bit
/// for bit, so NaN equals NaN), per-file reports and file counts. Warnings
/// are left out: a long-lived collector reports each problem once, by design.
fn difference(got: &Scrape, want: &Scrape) -> Option<String> {
    if let Some(difference) = family_difference(&got.families, &want.families) {
        return Some(difference);
    }
    if got.files != want.files {
        return Some(format!(
            "files\n{:#?}\nwanted\n{:#?}",
            got.files, want.files
        ));
    }
    let counts = |s: &Scrape| {
        (
            s.stats.files_ok,
            s.stats.files_bad,
            s.stats.files_vanished,
            s.stats.series,
        )
    };
    if counts(got) != counts(want) {
        return Some(format!("stats {:?}, wanted {:?}", got.stats, want.stats));
    }
    None
}

/// How the families `got` differ from `want`, if they do (values compared
/// bit for bit, so NaN equals NaN).
fn family_difference(got: &[MergedFamily], want: &[MergedFamily]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!(
            "{} families, not {}:\n{got:#?}\nwanted:\n{want:#?}",
            got.len(),
            want.len(),
        ));
    }
    for (g, w) in got.iter().zip(want) {
        let same = g.name == w.name
            && g.help == w.help
            && g.family_type == w.family_type
            && g.gauge_mode == w.gauge_mode
            && g.samples.len() == w.samples.len()
            && g.samples.iter().zip(&w.samples).all(|(a, b)| {
                a.name == b.name && a.labels == b.labels && a.value.to_bits() == b.value.to_bits()
            });
        if !same {
            return Some(format!("family\n{g:#?}\nwanted\n{w:#?}"));
        }
    }
    None
}
