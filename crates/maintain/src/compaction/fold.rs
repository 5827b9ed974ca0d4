//! The merge rule of each foldable file kind, applied entry by entry.
//!
//! Folding keeps every raw key as it is: two entries are combined only when
//! their keys are byte-identical, so whatever Python's collector does with
//! keys that differ (another help text, `le="1"` beside `le="1.0"`) it still
//! does with the folded file.

use std::collections::HashMap;

use multiprom_format::{layout, MergeRule, MetricKind};

/// The rule `kind`'s files are folded by, or `None` when they must never be
/// folded: `all` gauges keep one series per pid, and the `live*` modes drop
/// a process's values when it exits (those files are reaped instead).
#[must_use]
pub(crate) const fn fold_rule(kind: MetricKind) -> Option<MergeRule> {
    match (MergeRule::of(kind), kind) {
        (MergeRule::PerProcess, _) => None,
        (_, MetricKind::Gauge(mode)) if mode.is_live() => None,
        (rule, _) => Some(rule),
    }
}

/// Entries of several files of one kind, combined by key in first-seen order.
#[derive(Debug)]
pub(crate) struct Fold {
    rule: MergeRule,
    entries: Vec<(String, f64, f64)>,
    index: HashMap<String, usize>,
}

impl Fold {
    /// An empty fold.
    #[must_use]
    pub(crate) fn new(rule: MergeRule) -> Self {
        Fold {
            rule,
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Adds one entry.
    ///
    /// The first entry of a key is taken as it is; later ones combine by
    /// the rule ([`MergeRule::replaces`]: Python's comparisons).
    pub(crate) fn add(&mut self, key: &str, value: f64, timestamp: f64) {
        let Some(&i) = self.index.get(key) else {
            self.index.insert(key.to_owned(), self.entries.len());
            self.entries.push((key.to_owned(), value, timestamp));
            return;
        };
        let (_, current, current_ts) = &mut self.entries[i];
        match self.rule {
            // Python sums from 0.0; the fold keeps the latest timestamp
            // too (no reader uses it for these kinds).
            MergeRule::Sum => {
                *current += value;
                *current_ts = current_ts.max(timestamp);
            }
            rule => {
                if rule.replaces(*current, *current_ts, value, timestamp) {
                    *current = value;
                    if rule == MergeRule::MostRecent {
                        *current_ts = timestamp;
                    }
                }
            }
        }
    }

    /// Number of distinct keys.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The whole file, in Python's layout, exactly as long as its entries
    /// (no writer ever appends to a folded file).
    #[must_use]
    pub(crate) fn image(&self) -> Vec<u8> {
        layout::file_image(
            self.entries
                .iter()
                .map(|(key, value, ts)| (key.as_bytes(), *value, *ts)),
            0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_combines_like_python() {
        let cases = [
            (
                MergeRule::Sum,
                [(1.0, 0.0), (2.5, 0.0), (4.0, 0.0)],
                (7.5, 0.0),
            ),
            (
                MergeRule::Max,
                [(1.0, 0.0), (f64::NAN, 0.0), (4.0, 0.0)],
                (4.0, 0.0),
            ),
            (
                MergeRule::Min,
                [(1.0, 0.0), (-3.0, 0.0), (4.0, 0.0)],
                (-3.0, 0.0),
            ),
            (
                MergeRule::MostRecent,
                [(1.0, 10.0), (9.0, 30.0), (4.0, 20.0)],
                (9.0, 30.0),
            ),
        ];
        for (rule, adds, want) in cases {
            let mut fold = Fold::new(rule);
            for (value, ts) in adds {
                fold.add("k", value, ts);
            }
            fold.add("other", 5.0, 1.0);
            assert_eq!(fold.len(), 2);
            let (_, value, ts) = &fold.entries[0];
            assert_eq!((*value, *ts), want, "{rule:?}");
        }
    }

    #[test]
    fn the_image_reads_back() {
        let mut fold = Fold::new(MergeRule::Sum);
        fold.add(r#"["c", "c_total", {}, "h"]"#, 2.0, 0.0);
        fold.add(r#"["c", "c_total", {}, "h"]"#, 3.0, 0.0);
        let image = fold.image();
        let contents = multiprom_format::parse_file(&image, image.len() as u64).unwrap();
        assert_eq!(contents.entries.len(), 1);
        assert_eq!(contents.entries[0].value, 5.0);
        assert_eq!(contents.header.used, image.len() as u64);
    }
}
