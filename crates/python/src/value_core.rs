//! The Rust side of one value: its entry's key and file kind, and the slot
//! it writes through, which is replaced when the process identifier
//! changes (the entry is re-created in the new identifier's file) and made
//! read-only when the files are closed.

use std::sync::OnceLock;

use arc_swap::ArcSwap;
use multiprom_format::{Exemplar, ExemplarSlot, MetricKind, ValueSlot};
use pyo3::exceptions::PyValueError;
use pyo3::PyErr;

/// One value's entry.
pub(crate) struct ValueCore {
    kind: MetricKind,
    /// The entry key, `mmap_key(...)`'s exact text.
    key: Box<str>,
    /// Loaded on every update; stored only on cold paths.
    binding: ArcSwap<Binding>,
}

/// Where a value is written.
struct Binding {
    slot: ValueSlot,
    /// False once the files were closed (or could not be opened again for
    /// a new identifier): the slot is then only read, by `get()`, as
    /// Python's value still answers `get()` from what it last wrote.
    writable: bool,
    /// The entry's exemplar record, made on the first exemplar (`None` if
    /// the exemplar file could not be opened: reported once, then
    /// exemplars of this value are dropped). A new binding (a new
    /// identifier's files) starts without one.
    exemplar: OnceLock<Option<ExemplarSlot>>,
}

impl Binding {
    fn new(slot: ValueSlot, writable: bool) -> Binding {
        Binding {
            slot,
            writable,
            exemplar: OnceLock::new(),
        }
    }
}

impl ValueCore {
    pub(crate) fn new(kind: MetricKind, key: String, slot: ValueSlot) -> Self {
        ValueCore {
            kind,
            key: key.into_boxed_str(),
            binding: ArcSwap::from_pointee(Binding::new(slot, true)),
        }
    }

    pub(crate) fn kind(&self) -> MetricKind {
        self.kind
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// Writes go to `slot` from now on.
    pub(crate) fn bind(&self, slot: ValueSlot) {
        self.binding.store(Binding::new(slot, true).into());
    }

    /// No more writes: the value's file was closed.
    pub(crate) fn close(&self) {
        let slot = self.binding.load().slot.clone();
        self.binding.store(Binding::new(slot, false).into());
    }

    /// `value += amount`, timestamp 0.0.
    #[inline]
    pub(crate) fn inc(&self, amount: f64) -> Result<(), PyErr> {
        let binding = self.binding.load();
        if !binding.writable {
            return Err(closed());
        }
        let slot = &binding.slot;
        slot.add(amount);
        if slot.timestamp().to_bits() != 0 {
            // Only after a `set` with a timestamp on the same value, which
            // prometheus_client's metrics never combine with `inc`
            // (most-recent gauges refuse `inc`). Not atomic with a
            // concurrent `inc` of the same value: `ValueSlot` has no store
            // of the timestamp alone.
            slot.set_with_timestamp(slot.get(), 0.0);
        }
        Ok(())
    }

    /// `value = value`, with `timestamp`.
    #[inline]
    pub(crate) fn set(&self, value: f64, timestamp: f64) -> Result<(), PyErr> {
        let binding = self.binding.load();
        if !binding.writable {
            return Err(closed());
        }
        binding.slot.set_with_timestamp(value, timestamp);
        Ok(())
    }

    /// The exemplar record of the entry, made by `make` the first time
    /// (`make` may run Python code, so it runs outside the cell's own
    /// initialisation: a second thread waiting in there while holding the
    /// GIL would deadlock with it). `None` once the files were closed.
    pub(crate) fn exemplar_slot(
        &self,
        make: impl FnOnce() -> Option<ExemplarSlot>,
    ) -> Option<ExemplarSlot> {
        let binding = self.binding.load();
        if !binding.writable {
            return None;
        }
        if let Some(made) = binding.exemplar.get() {
            return made.clone();
        }
        // Two threads may both make it: the writer hands both the same
        // record, and the first one kept wins.
        let _ = binding.exemplar.set(make());
        binding.exemplar.get().cloned().flatten()
    }

    /// The exemplar stored last for this entry by this process.
    pub(crate) fn exemplar(&self) -> Option<Exemplar> {
        self.binding.load().exemplar.get()?.as_ref()?.load()
    }

    /// What the entry holds.
    #[inline]
    pub(crate) fn get(&self) -> f64 {
        self.binding.load().slot.get()
    }
}

#[cold]
fn closed() -> PyErr {
    PyValueError::new_err(
        "multiprom: this value's file was closed (close_all_files); metrics made since write to new files",
    )
}
