//! [`SettledSums`]: the settled files' share of a merge, worked out once.
//!
//! Python merges a series file by file, in listing order, and float
//! addition depends on the order, so in general a merge walks every entry
//! of every file on every scrape, settled or not. Much of it need not be
//! walked again while the settled files stay settled:
//!
//! * a series fed by settled files alone (a gone worker's gauge in `all`
//!   mode, say) is what it was: its merged state is kept whole, unless it
//!   is a most-recent gauge, whose output order is worked out across the
//!   family at every scrape;
//! * a series fed only by additions, whose settled terms are integers:
//!   integers whose magnitudes add up to at most 2^53 add exactly, so in
//!   any order, and the result is Python's bit for bit. Counters of events
//!   and histogram buckets are such sums. Such a series starts from the
//!   settled terms' sum and only the files still being written add to it;
//!   a live term that is not such an integer sends the scrape back to the
//!   walk in order;
//! * every other series (a histogram's `_sum`, a `livesum` gauge of
//!   fractions, a most-recent gauge) is merged from all its entries in
//!   order, the settled ones' values copied once into a sequence read
//!   straight through, rather than picked from all over the value buffer.

use crate::plan::{Accumulators, Op, Plan, Slot};

/// Integers up to this magnitude are floats exactly, and so is every sum
/// of them whose magnitudes add up to no more.
const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

/// Whether `value` is an integer that sums exactly.
fn exact(value: f64) -> bool {
    value.is_finite() && value.fract() == 0.0 && value.abs() <= EXACT
}

/// The operations of one file: a run of the plan's, or some picked from it.
#[derive(Debug, Clone)]
pub(crate) enum OpGroup<'a> {
    /// Operations `start..end`.
    Run(u32, u32),
    /// These operations, ascending.
    Picks(&'a [u32]),
}

impl OpGroup<'_> {
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (run, picks) = match self {
            OpGroup::Run(start, end) => (*start..*end, &[][..]),
            OpGroup::Picks(picks) => (0..0, *picks),
        };
        run.chain(picks.iter().copied())
    }
}

/// How a series is merged while the settled files stay settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Fed by settled files alone (not most-recent): kept whole.
    Kept,
    /// Additions of exact integers: the settled sum plus the live terms.
    Summed,
    /// Walked in order.
    Walked,
}

/// One operation of a walked series: its index and the operation (kept
/// here: looked up in the plan they were a cache miss each), and its value
/// and timestamp when its file is settled (`None`: read from the value
/// buffer).
#[derive(Debug, Clone, Copy)]
struct Walk {
    index: u32,
    op: Op,
    settled: Option<(f64, f64)>,
}

/// The settled files' share of the merge of one plan (or of the part of it
/// a filter keeps), for a given set of settled files.
#[derive(Debug, Default)]
pub(crate) struct SettledSums {
    /// What it was worked out for: the plan's generation and the version
    /// of the settled files (the collector changes it whenever a file may
    /// have become settled or unsettled).
    key: Option<(u64, u64)>,
    /// No file was settled: nothing to gain, walk in order.
    none_settled: bool,
    /// Kept series and their merged state.
    kept: Vec<(u32, Slot)>,
    /// Summed series: the settled terms' sum and the sum of their
    /// magnitudes.
    summed: Vec<(u32, f64, f64)>,
    /// The summed series' operations from files not settled, in order.
    live: Vec<u32>,
    /// The walked series' operations, in order.
    walked: Vec<Walk>,
    /// Per slot, this scrape: the live terms' magnitudes.
    live_magnitude: Vec<f64>,
}

impl SettledSums {
    /// Whether this was worked out for the plan of `generation` and the
    /// settled files of `version`.
    pub(crate) fn is_for(&self, generation: u64, version: u64) -> bool {
        self.key == Some((generation, version))
    }

    /// Works out the settled share of `groups`, the operations of each file
    /// (in plan order), for `key` (plan generation, settled version);
    /// `settled[i]` says whether the file of `groups`' `i`th is settled, and
    /// `values` holds every settled operation's value.
    pub(crate) fn build<'a>(
        plan: &Plan,
        key: (u64, u64),
        groups: impl Iterator<Item = OpGroup<'a>> + Clone,
        settled: &[bool],
        values: &[(f64, f64)],
    ) -> SettledSums {
        if !settled.contains(&true) {
            return SettledSums {
                key: Some(key),
                none_settled: true,
                ..SettledSums::default()
            };
        }
        let slots = plan.slot_count();
        let settled_flags = || settled.iter().copied();
        // Which series have live terms, which only add, and which have
        // settled terms that are not exact integers (or too big).
        let mut live = vec![false; slots];
        let mut only_adds = vec![true; slots];
        let mut most_recent = vec![false; slots];
        let mut sums = vec![(0.0f64, 0.0f64, true); slots];
        for (ops, settled) in groups.clone().zip(settled_flags()) {
            for op in ops.iter() {
                let kind = plan.ops[op as usize];
                let Some(slot) = kind.slot() else { continue };
                let slot = slot as usize;
                live[slot] |= !settled;
                match kind {
                    Op::Add(_) => {}
                    Op::MostRecent(_) => {
                        only_adds[slot] = false;
                        most_recent[slot] = true;
                    }
                    _ => only_adds[slot] = false,
                }
                if settled && matches!(kind, Op::Add(_)) {
                    let value = values[op as usize].0;
                    let (sum, magnitude, ok) = &mut sums[slot];
                    *magnitude += value.abs();
                    *ok &= exact(value) && *magnitude <= EXACT;
                    *sum += value;
                }
            }
        }
        let way = |slot: usize| {
            if !live[slot] && !most_recent[slot] {
                Way::Kept
            } else if only_adds[slot] && sums[slot].2 {
                Way::Summed
            } else {
                Way::Walked
            }
        };
        let mut built = SettledSums {
            key: Some(key),
            live_magnitude: vec![0.0; slots],
            ..SettledSums::default()
        };
        // The kept series' state: their operations applied in order.
        let mut scratch = Accumulators::default();
        scratch.start(plan);
        let mut touched = vec![false; slots];
        for (ops, settled) in groups.zip(settled_flags()) {
            for op in ops.iter() {
                let kind = plan.ops[op as usize];
                let Some(slot) = kind.slot() else { continue };
                let (value, timestamp) = values[op as usize];
                match way(slot as usize) {
                    Way::Kept => {
                        scratch.apply(kind, value, timestamp);
                        touched[slot as usize] = true;
                    }
                    Way::Summed if !settled => built.live.push(op),
                    Way::Summed => {}
                    Way::Walked => built.walked.push(Walk {
                        index: op,
                        op: kind,
                        settled: settled.then_some((value, timestamp)),
                    }),
                }
            }
        }
        for slot in 0..slots {
            match way(slot) {
                Way::Kept if touched[slot] => {
                    built.kept.push((slot as u32, scratch.get(slot as u32)))
                }
                Way::Summed if live[slot] || sums[slot].1 > 0.0 => {
                    built.summed.push((slot as u32, sums[slot].0, sums[slot].1));
                }
                _ => {}
            }
        }
        built
    }

    /// Merges `values` into `accumulators` from the settled share: `false`
    /// (with `accumulators` to be started again) when a live term of a
    /// summed series is not an integer that sums exactly, so the merge must
    /// walk everything in order.
    pub(crate) fn apply(
        &mut self,
        plan: &Plan,
        accumulators: &mut Accumulators,
        values: &[(f64, f64)],
    ) -> bool {
        if self.none_settled {
            return false;
        }
        accumulators.start(plan);
        for &(slot, state) in &self.kept {
            accumulators.put(slot, state);
        }
        for &(slot, sum, _) in &self.summed {
            accumulators.apply(Op::Add(slot), sum, 0.0);
        }
        self.live_magnitude.fill(0.0);
        for &op in &self.live {
            let kind = plan.ops[op as usize];
            let Some(slot) = kind.slot() else { continue };
            let (value, _) = values[op as usize];
            let magnitude = &mut self.live_magnitude[slot as usize];
            *magnitude += value.abs();
            if !exact(value) || *magnitude > EXACT {
                return false;
            }
            accumulators.apply(kind, value, 0.0);
        }
        // The settled magnitudes plus the live ones, per series.
        for &(slot, _, settled) in &self.summed {
            if settled + self.live_magnitude[slot as usize] > EXACT {
                return false;
            }
        }
        for walk in &self.walked {
            let (value, timestamp) = walk.settled.unwrap_or(values[walk.index as usize]);
            accumulators.apply(walk.op, value, timestamp);
        }
        true
    }
}
