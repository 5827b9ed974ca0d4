//! How `prometheus_client`'s collector combines one series' values across
//! the files of many processes (`MultiProcessCollector._accumulate_metrics`):
//! the one statement of it, which the collector's merge plan and the
//! maintainer's compaction both apply.

use crate::file_name::{GaugeMode, MetricKind};

/// How the values of one series combine across the files merged, by the
/// kind of file they are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MergeRule {
    /// Added, from 0.0 (`defaultdict(float)`, then `+=`): counters,
    /// histograms, summaries, `sum` and `livesum` gauges.
    Sum,
    /// Never combined: each process's value is a series of its own, with a
    /// `pid` label (`all` and `liveall` gauges).
    PerProcess,
    /// The smallest (`min`, `livemin`): the first value, then any value
    /// `< ` the one held (so a NaN never replaces a number, and a number
    /// never replaces a NaN held).
    Min,
    /// The largest (`max`, `livemax`), by `>` in the same way.
    Max,
    /// The value with the strictly latest timestamp (`mostrecent`,
    /// `livemostrecent`): replaced when the held timestamp is `<` the new
    /// one, so on a tie the first stays.
    MostRecent,
}

impl MergeRule {
    /// The rule of the files of `kind`.
    #[must_use]
    pub const fn of(kind: MetricKind) -> MergeRule {
        match kind {
            MetricKind::Counter | MetricKind::Histogram | MetricKind::Summary => MergeRule::Sum,
            MetricKind::Gauge(mode) => MergeRule::of_gauge(mode),
        }
    }

    /// The rule of gauges of `mode` (a `live*` mode combines as its plain
    /// one; what makes it live is when its files go).
    #[must_use]
    pub const fn of_gauge(mode: GaugeMode) -> MergeRule {
        match mode {
            GaugeMode::All | GaugeMode::LiveAll => MergeRule::PerProcess,
            GaugeMode::Min | GaugeMode::LiveMin => MergeRule::Min,
            GaugeMode::Max | GaugeMode::LiveMax => MergeRule::Max,
            GaugeMode::Sum | GaugeMode::LiveSum => MergeRule::Sum,
            GaugeMode::MostRecent | GaugeMode::LiveMostRecent => MergeRule::MostRecent,
        }
    }

    /// Whether a `value` recorded at `timestamp` replaces the `held` value
    /// recorded at `held_timestamp`, under a rule that keeps one of them
    /// ([`MergeRule::Min`], [`MergeRule::Max`], [`MergeRule::MostRecent`]);
    /// `false` under the others, which keep neither alone.
    #[inline]
    #[must_use]
    pub fn replaces(self, held: f64, held_timestamp: f64, value: f64, timestamp: f64) -> bool {
        match self {
            MergeRule::Min => value < held,
            MergeRule::Max => value > held,
            MergeRule::MostRecent => held_timestamp < timestamp,
            MergeRule::Sum | MergeRule::PerProcess => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_python_s_rule() {
        assert_eq!(MergeRule::of(MetricKind::Counter), MergeRule::Sum);
        assert_eq!(MergeRule::of(MetricKind::Summary), MergeRule::Sum);
        let gauge = |mode| MergeRule::of(MetricKind::Gauge(mode));
        assert_eq!(gauge(GaugeMode::LiveSum), MergeRule::Sum);
        assert_eq!(gauge(GaugeMode::All), MergeRule::PerProcess);
        assert_eq!(gauge(GaugeMode::LiveMin), MergeRule::Min);
        assert_eq!(gauge(GaugeMode::Max), MergeRule::Max);
        assert_eq!(gauge(GaugeMode::LiveMostRecent), MergeRule::MostRecent);
        assert!(GaugeMode::LiveAll.keeps_pid() && !GaugeMode::LiveSum.keeps_pid());
    }

    #[test]
    fn comparisons_are_python_s() {
        let nan = f64::NAN;
        assert!(MergeRule::Min.replaces(2.0, 0.0, 1.0, 0.0));
        assert!(!MergeRule::Min.replaces(1.0, 0.0, nan, 0.0));
        assert!(!MergeRule::Min.replaces(nan, 0.0, 1.0, 0.0));
        assert!(MergeRule::Max.replaces(1.0, 0.0, 2.0, 0.0));
        assert!(!MergeRule::Max.replaces(1.0, 0.0, 1.0, 0.0));
        assert!(MergeRule::MostRecent.replaces(9.0, 1.0, 0.0, 2.0));
        assert!(!MergeRule::MostRecent.replaces(9.0, 2.0, 0.0, 2.0));
        assert!(!MergeRule::Sum.replaces(1.0, 0.0, 2.0, 9.0));
    }
}
