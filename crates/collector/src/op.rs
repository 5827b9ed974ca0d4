//! [`Op`]: what one entry does to its output series. Its own module, as the
//! plan makes operations and a tracked file reads values by them: both take
//! it from here, and the plan takes tracked files, one way.

/// What one entry does to its output series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Left out (an entry of a type other than its family's).
    Skip,
    /// `+= value` (counters, summaries, histogram `_sum` and buckets, gauges
    /// in `sum` modes).
    Add(u32),
    /// `= value` (gauges in `all` modes).
    Set(u32),
    /// `setdefault`, then keep the smaller.
    Min(u32),
    /// `setdefault`, then keep the larger.
    Max(u32),
    /// Keep the value with the newest timestamp.
    MostRecent(u32),
}

impl Op {
    /// The slot the operation writes, if any.
    pub(crate) fn slot(self) -> Option<u32> {
        match self {
            Op::Skip => None,
            Op::Add(slot)
            | Op::Set(slot)
            | Op::Min(slot)
            | Op::Max(slot)
            | Op::MostRecent(slot) => Some(slot),
        }
    }
}
