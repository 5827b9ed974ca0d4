//! The file format of `prometheus_client`'s multiprocess mode.
//!
//! Python workers write one `*.db` file per metric type and process into the
//! directory named by `PROMETHEUS_MULTIPROC_DIR`; this crate reads and writes
//! exactly those files, so Rust and Python workers can share one directory.
//! It is synchronous and has no HTTP in it.
//!
//! * [`FileName`]: `counter_<id>.db`, `gauge_<mode>_<id>.db`, ...
//! * [`encode_key`] / [`Key::decode`]: entry keys, byte-identical to Python's
//!   `json.dumps(..., sort_keys=True)`.
//! * [`read_file`], [`EntryIter`]: reading with `pread`, with a typed
//!   [`ReadError`] carrying path and byte offset for every kind of damage.
//! * [`read_map`]: reading through read-only maps, safe against truncation.
//! * [`FileWriter`], [`ValueSlot`]: atomic creation, Python's growth policy,
//!   lock-free value updates.
//! * [`ExemplarWriter`], [`ExemplarSlot`], [`read_exemplar_file`]:
//!   exemplars in companion files Python never reads ([`exemplar_file`]).
//! * [`NativeHistogramWriter`], [`NativeSeries`], [`read_native_histogram_file`],
//!   [`NativeHistogram`]: native histograms in companion files Python never
//!   reads ([`native_file`]), with Prometheus's bucket layout
//!   ([`native_buckets`]).
//! * [`float_to_go_string`]: Python's `floatToGoString`; [`write_python_repr`]:
//!   Python's `repr(float)`.
//! * [`fork`]: fork detection for writers (a `pthread_atfork` generation).
//! * [`write_lease`]: whether any process on the machine has a file open or
//!   mapped for writing, asked of the kernel (a read lease).
//! * [`layout`]: the byte layout, and [`layout::file_image`] for fixtures.
//!
//! # Where the `unsafe` code is
//!
//! `unsafe` code lives in this crate only (the workspace denies it
//! elsewhere), in four modules, each of which allows it for itself:
//!
//! * `mapping`: the writer's shared, writable mapping, its atomic value
//!   slots and the atomic words of exemplar and native histogram records;
//! * [`read_map`]: read-only mappings for collectors, read through raw
//!   pointers and `Relaxed` atomic loads, with a SIGBUS guard so a file shrunk
//!   under a map is an error, not a crash;
//! * [`fork`]: `pthread_atfork` (a store through a mapping inherited across
//!   `fork()` would land in the parent's file) and the test-only fork
//!   helpers;
//! * `write_lease`: `fcntl` for a read lease, taken and let go at once.
//!
//! Every `unsafe` block there has a `SAFETY:` comment that argues why it
//! holds. This list is the one place that names them.
//!
//! ```
//! use multiprom_format::{encode_key, read_file, FileName, FileWriter, GaugeMode, MetricKind};
//!
//! let dir = tempfile::tempdir()?;
//! let name = FileName::new(MetricKind::Gauge(GaugeMode::LiveSum), "4242")?;
//! let mut writer = FileWriter::open(dir.path(), &name)?;
//! let key = encode_key("running", "running", [("model", "llama")], "Running requests");
//! let slot = writer.slot(&key)?;
//! slot.add(3.0);
//! slot.add(-1.0);
//!
//! let contents = read_file(&dir.path().join("gauge_livesum_4242.db"))?;
//! assert_eq!(contents.header.used, 8 + multiprom_format::layout::entry_len(key.len()) as u64);
//! let entry = &contents.entries[0];
//! assert_eq!(entry.raw_key, r#"["running", "running", {"model": "llama"}, "Running requests"]"#);
//! assert_eq!(entry.key.labels, [("model".to_string(), "llama".to_string())]);
//! assert_eq!((entry.value, entry.timestamp), (2.0, 0.0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(not(target_endian = "little"))]
compile_error!("multiprom-format supports little-endian targets only");

mod companion_file;
mod env_dir;
mod error;
mod exemplar;
pub mod exemplar_file;
mod exemplar_writer;
mod file_name;
mod float;
pub mod fork;
mod identity;
mod key;
pub mod layout;
mod listing;
mod mapping;
mod merge_rule;
pub mod native_buckets;
pub mod native_file;
mod native_histogram;
mod native_writer;
mod open;
mod parse;
mod process_files;
mod read;
pub mod read_map;
mod write_lease;
mod writer;

pub use env_dir::{EnvDir, EnvDirError, DIR_ENV_VAR, LEGACY_DIR_ENV_VAR};
pub use error::{printable, IoError, ReadError, ReadErrorKind, WriteError};
pub use exemplar::{check_exemplar_labels, Exemplar, ExemplarError, MAX_EXEMPLAR_RUNES};
pub use exemplar_file::{
    exemplar_entry_layouts, read_exemplar_file, read_exemplar_records, read_mapped_exemplar,
    ExemplarEntry, ExemplarEntryLayout, ExemplarFile, ExemplarRecord, MappedExemplar, RecordSeal,
    RecordedExemplar,
};
pub use exemplar_writer::{ExemplarSlot, ExemplarWriter, Stored};
pub use file_name::{FileName, FileNameError, GaugeMode, MetricKind, COMPACTED_ID, STAGING_DIR};
pub use float::{float_to_go_string, write_float_to_go_string, write_python_repr};
pub use identity::FileIdentity;
pub use key::{encode_key, Key, KeyError};
pub use listing::scan_dir;
pub use mapping::ValueSlot;
pub use merge_rule::MergeRule;
pub use native_file::{
    native_record_layouts, read_native_histogram_bytes, read_native_histogram_file,
    read_native_histogram_file_into, read_native_record_counts, visit_native_histogram_file,
    NativeCounts, NativeHistogramEntry, NativeHistogramFile, NativeRecord, NativeRecordLayout,
    NativeVisitScratch,
};
pub use native_histogram::NativeHistogram;
pub use native_writer::{NativeHistogramConfig, NativeHistogramWriter, NativeSeries};
pub use open::{open_for_read, OpenDir};
pub use parse::{
    frame_entry, parse_file, parse_header, Entry, EntryIter, FileContents, Header, ParseError,
    RawEntry, ValidPrefix,
};
pub use process_files::{ProcessFileError, ProcessFiles};
pub use read::{
    read_file, read_used_bytes, read_used_into_with_hint, read_valid_prefix, UsedBytes,
};
pub use write_lease::{write_lease, LeaseProbe, WriteLease};
pub use writer::{FileWriter, SetAside};

/// The system's memory page size (4 KiB on most hosts, 16 or 64 KiB on some
/// aarch64 ones): what maps are rounded to, what a store through a map
/// faults in, and what the SIGBUS guard replaces. Read from the system,
/// never assumed.
#[must_use]
pub fn page_size() -> usize {
    rustix::param::page_size()
}

#[cfg(test)]
mod page_tests {
    /// The page size is the system's. `MULTIPROM_EXPECT_PAGE_SIZE` names the
    /// one a run must see (`just dist-check` runs these tests for aarch64
    /// under qemu-user with 64 KiB pages, and checks that they had them).
    #[test]
    fn page_size_is_the_systems() {
        let page = super::page_size();
        assert!(page.is_power_of_two() && page >= 4096, "{page}");
        if let Ok(expected) = std::env::var("MULTIPROM_EXPECT_PAGE_SIZE") {
            assert_eq!(page.to_string(), expected);
        }
    }
}
