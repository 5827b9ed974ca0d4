//! The Rust side of one value: its entry's key and file kind, and the slot
//! it writes through, which is replaced when the process identifier
//! changes (the entry is re-created in the new identifier's file) and made
//! read-only when the files are closed.

use arc_swap::ArcSwap;
use multiprom_format::{MetricKind, ValueSlot};
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
}

impl ValueCore {
    pub(crate) fn new(kind: MetricKind, key: String, slot: ValueSlot) -> Self {
        ValueCore {
            kind,
            key: key.into_boxed_str(),
            binding: ArcSwap::from_pointee(Binding {
                slot,
                writable: true,
            }),
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
        self.binding.store(
            Binding {
                slot,
                writable: true,
            }
            .into(),
        );
    }

    /// No more writes: the value's file was closed.
    pub(crate) fn close(&self) {
        let slot = self.binding.load().slot.clone();
        self.binding.store(
            Binding {
                slot,
                writable: false,
            }
            .into(),
        );
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
