//! One child (label set) of a metric: its value slots, and the fork check
//! every update goes through.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use multiprom_format::fork::fork_generation;
use multiprom_format::{ExemplarSlot, MetricKind, ValueSlot};

use crate::clock::unix_time;
use crate::definition::Definition;
use crate::directory_writer::{Creator, DirectoryWriter, NewEntries};
use crate::error::ClientError;

/// Slots re-created in a forked child's own files.
type Rebound = Option<(u64, Box<[ValueSlot]>)>;

/// Exemplar slots in a forked child's own exemplar files, per key, made on
/// the key's first exemplar there.
type ReboundExemplars = Option<(u64, Box<[Option<ExemplarSlot>]>)>;

/// The entries of one child, shared by all clones of its handle.
pub struct Series {
    /// Where the entries are written; re-creates them after a fork.
    writer: Arc<DirectoryWriter>,
    definition: Arc<Definition>,
    label_values: Box<[Box<str>]>,
    keys: Box<[Arc<str>]>,
    /// Fork generation the primary slots belong to.
    generation: u64,
    /// In the order of `keys`.
    slots: Box<[ValueSlot]>,
    /// Used only in a process forked after the slots were made; a mutex is
    /// fine there (the fast path never takes it).
    rebound: Mutex<Rebound>,
    /// Exemplar slots of `generation`, one cell per key in the order of
    /// `keys`: the table is allocated on the series' first exemplar, a cell
    /// filled on its key's first (most series never get one, and pay one
    /// empty `OnceLock`).
    exemplars: OnceLock<Box<[OnceLock<ExemplarSlot>]>>,
    /// As `exemplars`, in a process forked after the series was made.
    rebound_exemplars: Mutex<ReboundExemplars>,
}

impl Series {
    /// The child of `definition` with `label_values`, over its `entries`
    /// just created by `writer`.
    pub(crate) fn new(
        writer: Arc<DirectoryWriter>,
        definition: Arc<Definition>,
        label_values: &[&str],
        entries: NewEntries,
    ) -> Series {
        let NewEntries {
            keys,
            generation,
            slots,
        } = entries;
        Series {
            writer,
            definition,
            label_values: label_values.iter().map(|v| Box::from(*v)).collect(),
            keys,
            generation,
            slots,
            rebound: Mutex::new(None),
            exemplars: OnceLock::new(),
            rebound_exemplars: Mutex::new(None),
        }
    }

    /// Creates the entries of `definition`'s child with `label_values`
    /// (at 0) and returns the child.
    pub(crate) fn create(
        writer: &Arc<DirectoryWriter>,
        definition: &Arc<Definition>,
        label_values: &[&str],
        creator: &mut Creator<'_>,
    ) -> Result<Series, ClientError> {
        let entries = creator.entries(definition, label_values)?;
        Ok(Series::new(
            Arc::clone(writer),
            Arc::clone(definition),
            label_values,
            entries,
        ))
    }

    pub(crate) fn definition(&self) -> &Definition {
        &self.definition
    }

    pub(crate) fn label_values(&self) -> &[Box<str>] {
        &self.label_values
    }

    /// Runs `f` on this process's slots. `None` only in a forked child whose
    /// own files could not be created (reported on stderr once).
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&[ValueSlot]) -> R) -> Option<R> {
        if fork_generation() == self.generation {
            Some(f(&self.slots))
        } else {
            self.with_rebound(f)
        }
    }

    #[cold]
    #[inline(never)]
    fn with_rebound<R>(&self, f: impl FnOnce(&[ValueSlot]) -> R) -> Option<R> {
        let generation = fork_generation();
        let mut rebound = self.rebound.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(&*rebound, Some((g, _)) if *g == generation) {
            match self.writer.rebind(self.kind(), &self.keys) {
                Ok(slots) => *rebound = Some((generation, slots)),
                Err(err) => {
                    self.writer.report_fork_failure(&err);
                    return None;
                }
            }
        }
        rebound.as_ref().map(|(_, slots)| f(slots))
    }

    fn kind(&self) -> MetricKind {
        self.definition.kind
    }

    /// The value of the slot at `index` (NaN if unavailable after a failed
    /// re-creation in a forked child).
    pub(crate) fn get(&self, index: usize) -> f64 {
        self.with(|slots| slots.get(index).map_or(f64::NAN, ValueSlot::get))
            .unwrap_or(f64::NAN)
    }

    /// Adds to the slot at `index`.
    #[inline]
    pub(crate) fn add(&self, index: usize, delta: f64) {
        self.with(|slots| {
            if let Some(slot) = slots.get(index) {
                slot.add(delta);
            }
        });
    }

    /// Sets the slot at `index`, leaving its timestamp alone.
    #[inline]
    pub(crate) fn set(&self, index: usize, value: f64) {
        self.with(|slots| {
            if let Some(slot) = slots.get(index) {
                slot.set(value);
            }
        });
    }
}

impl Series {
    /// Stores an exemplar (labels already validated) for the entry at
    /// `index`, stamped with the current time. Never fails: an exemplar
    /// that cannot be stored is dropped (the failure is printed once).
    pub(crate) fn store_exemplar(&self, index: usize, labels: &[(&str, &str)], value: f64) {
        let timestamp = unix_time();
        if fork_generation() != self.generation {
            self.store_exemplar_rebound(index, labels, value, timestamp);
            return;
        }
        let cells = self
            .exemplars
            .get_or_init(|| self.keys.iter().map(|_| OnceLock::new()).collect());
        let (Some(cell), Some(key)) = (cells.get(index), self.keys.get(index)) else {
            return;
        };
        let slot = match cell.get() {
            Some(slot) => slot,
            None => {
                // Two threads may both get here: the writer hands both the
                // same slot, and one of them is kept.
                let Some(slot) = self.writer.exemplar_slot(self.kind(), key) else {
                    return;
                };
                cell.get_or_init(|| slot)
            }
        };
        // Labels were validated, so only `Busy` (another thread storing into
        // this record this very moment) can come back: that exemplar is
        // dropped, as a series keeps only the latest anyway.
        let _ = slot.store(labels.iter().copied(), value, timestamp);
    }

    #[cold]
    #[inline(never)]
    fn store_exemplar_rebound(
        &self,
        index: usize,
        labels: &[(&str, &str)],
        value: f64,
        timestamp: f64,
    ) {
        let generation = fork_generation();
        let mut rebound = self
            .rebound_exemplars
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let cells = match &mut *rebound {
            Some((g, cells)) if *g == generation => cells,
            stale => {
                // Slots of an earlier generation are in an ancestor's files.
                let cells = &mut stale
                    .insert((generation, self.keys.iter().map(|_| None).collect()))
                    .1;
                cells
            }
        };
        let (Some(cell), Some(key)) = (cells.get_mut(index), self.keys.get(index)) else {
            return;
        };
        if cell.is_none() {
            *cell = self.writer.exemplar_slot(self.kind(), key);
        }
        if let Some(slot) = cell {
            let _ = slot.store(labels.iter().copied(), value, timestamp);
        }
    }
}

impl fmt::Debug for Series {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<(&str, &str)> = self
            .definition
            .label_names
            .iter()
            .map(String::as_str)
            .zip(self.label_values.iter().map(|v| &**v))
            .collect();
        let values: Vec<f64> = self
            .with(|slots| slots.iter().map(ValueSlot::get).collect())
            .unwrap_or_default();
        f.debug_struct("Series")
            .field("family", &self.definition.family)
            .field("labels", &labels)
            .field("values", &values)
            .finish()
    }
}
