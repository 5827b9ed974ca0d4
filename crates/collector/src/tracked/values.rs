//! Copying a tracked file's values out for the merge: every entry's, or
//! the ones a filtered plan picks.

use multiprom_format::ParseError;

use super::{shrunk, Access, TrackedFile};
use crate::op::Op;

impl TrackedFile {
    /// Copies the values (and, for most-recent gauges, the timestamps) of
    /// this file's entries into `out`, one per entry, as `ops` (the plan's
    /// operations for them) need. `Err` if the file shrank under its map.
    /// Every slot of `out` is written (zero where the file has no entry for
    /// it), so the caller need not clear `out` first.
    pub(crate) fn gather_values(
        &self,
        ops: &[Op],
        out: &mut [(f64, f64)],
    ) -> Result<(), ParseError> {
        let written = match &self.access {
            Access::Mapped(map) => map
                .read(|view| {
                    let mut written = 0;
                    for ((entry, &op), slot) in self.entries.iter().zip(ops).zip(out.iter_mut()) {
                        let at = entry.value_at as usize;
                        let value = view.f64_at(at).unwrap_or(0.0);
                        let timestamp = match op {
                            Op::MostRecent(_) => view.f64_at(at + 8).unwrap_or(0.0),
                            _ => 0.0,
                        };
                        *slot = (value, timestamp);
                        written += 1;
                    }
                    written
                })
                .map_err(|_| shrunk())?,
            Access::Read { values } => {
                for (slot, &value) in out.iter_mut().zip(values) {
                    *slot = value;
                }
                values.len().min(out.len())
            }
            Access::Closed => 0,
        };
        out[written..].fill((0.0, 0.0));
        Ok(())
    }
}

impl TrackedFile {
    /// Copies the values of some of this file's entries into `values`:
    /// for each `pick`, the entry `pick - first_op` into `values[pick]`, as
    /// `ops[pick]` needs (the plan's operations and values, indexed alike).
    /// An entry the file no longer has reads as zero. `Err` if the file
    /// shrank under its map.
    pub(crate) fn gather_picked(
        &self,
        picks: &[u32],
        first_op: usize,
        ops: &[Op],
        values: &mut [(f64, f64)],
    ) -> Result<(), ParseError> {
        let entry = |pick: u32| (pick as usize).checked_sub(first_op);
        match &self.access {
            Access::Mapped(map) => map
                .read(|view| {
                    for &pick in picks {
                        let (Some(slot), Some(op)) =
                            (values.get_mut(pick as usize), ops.get(pick as usize))
                        else {
                            continue;
                        };
                        *slot = match entry(pick).and_then(|e| self.entries.get(e)) {
                            Some(entry) => {
                                let at = entry.value_at as usize;
                                let value = view.f64_at(at).unwrap_or(0.0);
                                let timestamp = match op {
                                    Op::MostRecent(_) => view.f64_at(at + 8).unwrap_or(0.0),
                                    _ => 0.0,
                                };
                                (value, timestamp)
                            }
                            None => (0.0, 0.0),
                        };
                    }
                })
                .map_err(|_| shrunk()),
            Access::Read { values: read } => {
                for &pick in picks {
                    if let Some(slot) = values.get_mut(pick as usize) {
                        *slot = entry(pick)
                            .and_then(|e| read.get(e))
                            .copied()
                            .unwrap_or((0.0, 0.0));
                    }
                }
                Ok(())
            }
            Access::Closed => {
                for &pick in picks {
                    if let Some(slot) = values.get_mut(pick as usize) {
                        *slot = (0.0, 0.0);
                    }
                }
                Ok(())
            }
        }
    }
}
