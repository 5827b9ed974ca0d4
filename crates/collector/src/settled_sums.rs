//! [`SettledSums`]: the settled files' share of a merge, summed once.
//!
//! Python adds a series' values file by file, in listing order, and float
//! addition depends on the order, so a merge must in general walk every
//! entry of every file on every scrape, settled or not. Not when every term
//! is an integer: integers whose magnitudes add up to at most 2^53 are
//! added exactly, so in any order, and the result is Python's bit for bit.
//! Counters of events and histogram buckets are such sums. So a series fed
//! only by additions, whose settled terms are such integers, starts each
//! scrape from the settled files' sum, and only the files still being
//! written add to it; if one of them brings a term that is not such an
//! integer, the scrape falls back to the walk in order. Every other series
//! (gauges that are set, kept at their least or greatest or most recent;
//! sums with fractions, such as a histogram's `_sum`) is merged as before,
//! from all its entries in order.

use crate::plan::{Accumulators, Op, Plan};

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

/// The settled files' share of the merge of one plan (or of the part of it
/// a filter keeps), for a given set of settled files.
#[derive(Debug, Default)]
pub(crate) struct SettledSums {
    /// What it was summed for: the plan's generation and, per operation
    /// group given to [`SettledSums::build`], since when its file was
    /// settled (`None`: not settled).
    key: (u64, Vec<Option<u64>>),
    /// Per slot: whether it is fed only by additions whose settled terms
    /// are exact integers.
    fast: Vec<bool>,
    /// Per slot: the settled terms' sum, and the sum of their magnitudes.
    base: Vec<(f64, f64)>,
    /// The operations of the other slots, settled or not, in plan order.
    slow: Vec<u32>,
    /// The operations of fast slots from files not settled, in plan order.
    live: Vec<u32>,
    /// Per slot, this scrape: the live terms' magnitudes.
    live_magnitude: Vec<f64>,
}

impl SettledSums {
    /// Whether these sums were made for the plan of `generation` with
    /// exactly the files settled, and since when, that `since` says.
    pub(crate) fn is_for(&self, generation: u64, since: &[Option<u64>]) -> bool {
        self.key.0 == generation && self.key.1 == since
    }

    /// Sums the settled share of `groups`, the operations of each file (in
    /// plan order); `since[i]` says since when the file of `groups`' `i`th
    /// is settled (`None`: not settled), and `values` holds every settled
    /// operation's value.
    pub(crate) fn build<'a>(
        plan: &Plan,
        generation: u64,
        groups: impl Iterator<Item = OpGroup<'a>> + Clone,
        since: &[Option<u64>],
        values: &[(f64, f64)],
    ) -> SettledSums {
        let slots = plan.slot_count();
        let mut fast = vec![true; slots];
        let mut base = vec![(0.0, 0.0); slots];
        for (ops, settled) in groups.clone().zip(since.iter().map(Option::is_some)) {
            for op in ops.iter() {
                let Some(slot) = plan.ops[op as usize].slot() else {
                    continue;
                };
                let slot = slot as usize;
                if !matches!(plan.ops[op as usize], Op::Add(_)) {
                    fast[slot] = false;
                } else if settled {
                    let value = values[op as usize].0;
                    let (sum, magnitude) = &mut base[slot];
                    *magnitude += value.abs();
                    if exact(value) && *magnitude <= EXACT {
                        *sum += value;
                    } else {
                        fast[slot] = false;
                    }
                }
            }
        }
        let mut slow = Vec::new();
        let mut live = Vec::new();
        for (ops, settled) in groups.zip(since.iter().map(Option::is_some)) {
            for op in ops.iter() {
                let Some(slot) = plan.ops[op as usize].slot() else {
                    continue;
                };
                if !fast[slot as usize] {
                    slow.push(op);
                } else if !settled {
                    live.push(op);
                }
            }
        }
        SettledSums {
            key: (generation, since.to_vec()),
            fast,
            base,
            slow,
            live,
            live_magnitude: vec![0.0; slots],
        }
    }

    /// Merges `values` into `accumulators` from the settled sums: `false`
    /// (with `accumulators` to be started again) when a live term is not an
    /// integer that sums exactly, so the merge must walk everything in order.
    pub(crate) fn apply(
        &mut self,
        plan: &Plan,
        accumulators: &mut Accumulators,
        values: &[(f64, f64)],
    ) -> bool {
        accumulators.start(plan);
        for (slot, (&fast, &(sum, _))) in self.fast.iter().zip(&self.base).enumerate() {
            if fast {
                accumulators.apply(Op::Add(slot as u32), sum, 0.0);
            }
        }
        self.live_magnitude.fill(0.0);
        for &op in &self.live {
            let (value, _) = values[op as usize];
            let Some(slot) = plan.ops[op as usize].slot() else {
                continue;
            };
            let slot = slot as usize;
            let magnitude = &mut self.live_magnitude[slot];
            *magnitude += value.abs();
            if !exact(value) || self.base[slot].1 + *magnitude > EXACT {
                return false;
            }
            accumulators.apply(plan.ops[op as usize], value, 0.0);
        }
        for &op in &self.slow {
            let (value, timestamp) = values[op as usize];
            accumulators.apply(plan.ops[op as usize], value, timestamp);
        }
        true
    }
}
