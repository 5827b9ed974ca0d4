//! A live worker of the native histogram tests: its histogram file (the
//! classic part of a native-only histogram, `_sum` and `+Inf`, for each
//! route) and its native histogram file, to observe into.

use std::path::{Path, PathBuf};

use multiprom_collector::DirCollector;
use multiprom_format::native_file::native_histogram_path;
use multiprom_format::{
    encode_key, native_record_layouts, FileName, FileWriter, MetricKind, NativeHistogramConfig,
    NativeHistogramWriter,
};

pub(crate) const NAME: &str = "latency_seconds";
pub(crate) const HELP: &str = "Latency.";

/// The native series key of `route`.
pub(crate) fn key(route: &str) -> String {
    encode_key(NAME, NAME, [("route", route)], HELP)
}

/// A collector of live workers' files in `dir`: told that every writer
/// lives, so nothing settles and every protobuf scrape reads every native
/// file (through maps from the second scrape on).
pub(crate) fn live_collector(dir: &Path) -> DirCollector {
    DirCollector::new(dir).settle_exited_writers(|_: &FileName| false)
}

pub(crate) struct Worker {
    pub(crate) name: FileName,
    _file: FileWriter,
    natives: NativeHistogramWriter,
}

/// Worker `id`'s histogram file in `dir`, with the classic part of a
/// native-only histogram for each of `routes`, and no native file yet.
pub(crate) fn classic_part(dir: &Path, id: &str, routes: &[&str]) -> (FileName, FileWriter) {
    let name = FileName::new(MetricKind::Histogram, id).expect("a file name");
    let mut file = FileWriter::open(dir, &name).expect("a histogram file");
    for route in routes {
        let key = |sample: &str, le: &[(&str, &str)]| {
            let labels = le.iter().copied().chain([("route", *route)]);
            encode_key(NAME, sample, labels, HELP)
        };
        let sum = file.slot(&key("latency_seconds_sum", &[]));
        sum.expect("a slot").add(1.0);
        let inf = file.slot(&key("latency_seconds_bucket", &[("le", "+Inf")]));
        inf.expect("a slot").add(1.0);
    }
    (name, file)
}

impl Worker {
    /// Worker `id`'s files in `dir`, with a histogram for each of `routes`.
    pub(crate) fn new(dir: &Path, id: &str, routes: &[&str]) -> Worker {
        let (name, file) = classic_part(dir, id, routes);
        Worker::beside(dir, name, file)
    }

    /// The worker of the histogram `file` named `name` in `dir`, its
    /// native histogram file opened now.
    pub(crate) fn beside(dir: &Path, name: FileName, file: FileWriter) -> Worker {
        let natives = NativeHistogramWriter::open(dir, &name).expect("a native file");
        Worker {
            name,
            _file: file,
            natives,
        }
    }

    /// Observes `values` into `route`'s native series, with room for
    /// `max_buckets` buckets per record.
    pub(crate) fn observe(
        &self,
        route: &str,
        max_buckets: u32,
        values: impl IntoIterator<Item = f64>,
    ) {
        let config = NativeHistogramConfig {
            max_buckets,
            ..NativeHistogramConfig::default()
        };
        let series = self.natives.series(&key(route), config).expect("a series");
        for value in values {
            series.observe(value);
        }
    }

    /// Its native histogram file.
    pub(crate) fn native_path(&self, dir: &Path) -> PathBuf {
        native_histogram_path(dir, &self.name)
    }

    /// The byte offset of the current record of `route`'s series in its
    /// native histogram file, if it has one.
    pub(crate) fn record(&self, dir: &Path, route: &str) -> Option<usize> {
        let bytes = std::fs::read(self.native_path(dir)).ok()?;
        let used = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let mut layouts = Vec::new();
        native_record_layouts(&bytes, 8, used, &mut layouts).ok()?;
        let key = key(route);
        layouts.iter().rfind(|l| l.key == key).map(|l| l.record)
    }
}
