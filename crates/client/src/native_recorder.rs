//! One child's native series in this process's native histogram file, and
//! the fork check every observation goes through (as [`crate::series`] does
//! for values).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use multiprom_format::fork::fork_generation;
use multiprom_format::{NativeHistogramConfig, NativeSeries};

use crate::directory_writer::DirectoryWriter;

/// Records one child's observations natively.
pub(crate) struct NativeRecorder {
    /// Re-creates the series in a forked child's own file.
    writer: Arc<DirectoryWriter>,
    key: Arc<str>,
    config: NativeHistogramConfig,
    /// Fork generation `series` belongs to.
    generation: u64,
    series: NativeSeries,
    /// The series in the file of a process forked after `series` was made;
    /// a mutex is fine there (the fast path never takes it).
    rebound: Mutex<Option<(u64, NativeSeries)>>,
}

impl NativeRecorder {
    pub(crate) fn new(
        writer: Arc<DirectoryWriter>,
        key: Arc<str>,
        config: NativeHistogramConfig,
        (series, generation): (NativeSeries, u64),
    ) -> NativeRecorder {
        NativeRecorder {
            writer,
            key,
            config,
            generation,
            series,
            rebound: Mutex::new(None),
        }
    }

    /// Records `value` in this process's file. Never fails: in a forked
    /// child whose native file cannot be made the observation is dropped
    /// (printed once), and a full file keeps counting in the nearest bucket.
    #[inline]
    pub(crate) fn observe(&self, value: f64) {
        if fork_generation() == self.generation {
            self.series.observe(value);
        } else if let Some(series) = self.rebound() {
            series.observe(value);
        }
    }

    /// The histogram this process has recorded; `None` in a forked child
    /// whose native file could not be made.
    pub(crate) fn snapshot(&self) -> Option<multiprom_format::NativeHistogram> {
        if fork_generation() == self.generation {
            Some(self.series.snapshot())
        } else {
            self.rebound().map(|series| series.snapshot())
        }
    }

    /// This process's series, made in its own file on first use after a fork.
    #[cold]
    #[inline(never)]
    fn rebound(&self) -> Option<NativeSeries> {
        let generation = fork_generation();
        let mut rebound = self.rebound.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((g, series)) = &*rebound {
            if *g == generation {
                return Some(series.clone());
            }
        }
        match self.writer.rebind_native(&self.key, self.config) {
            Ok(series) => {
                *rebound = Some((generation, series.clone()));
                Some(series)
            }
            Err(err) => {
                self.writer.report_native_failure(&err);
                None
            }
        }
    }
}

impl fmt::Debug for NativeRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeRecorder")
            .field("config", &self.config)
            .field("histogram", &self.snapshot())
            .finish()
    }
}
