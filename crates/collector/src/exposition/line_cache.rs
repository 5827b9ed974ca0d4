//! [`LineCache`]: the last encoding's sample lines, so that a scrape of a
//! directory where little changed copies most lines instead of formatting
//! them again.
//!
//! Formatting a sample line (escaping its labels, printing its value as
//! Python does) is most of what encoding costs, and most of a frequent
//! poll's lines are what they were the last time: a thousand exited
//! workers' series do not move. A merge plan hands every scrape the same
//! name and label set (the same `Arc`s) for the same series, so a line is
//! known unchanged by two pointer comparisons and the bits of its value
//! (and, for a line with an exemplar, the exemplar's pointer: a collection
//! hands on the same `Arc` for an exemplar that did not change).
//! The cache holds on to the families it last encoded, so a pointer it
//! compares with is still theirs, never a later allocation's at a freed
//! address; the lines themselves hold no reference, which would cost two
//! reference counts each way per line and scrape.

use std::sync::Arc;

use crate::family::{MergedFamily, MergedSample};

use super::format::Format;
use super::names::Escaping;
use super::sample_lines::SampleLines;
use super::{openmetrics, prometheus};

/// The sample lines of the last [`LineCache::encode`], to reuse.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::exposition::LineCache;
/// use multiprom_collector::{Escaping, FamilyType, Format, MergedFamily, MergedSample};
/// let mut family = MergedFamily {
///     name: "up".into(),
///     help: "Up.".into(),
///     family_type: FamilyType::Gauge,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: "up".into(), labels: Arc::from([]), value: 1.0, exemplar: None }],
/// };
/// let mut cache = LineCache::default();
/// let mut first = String::new();
/// cache.encode(Format::Prometheus, Escaping::Underscores, Arc::new(vec![family.clone()]), &mut first);
/// family.samples[0].value = 0.5;
/// let mut second = String::new();
/// cache.encode(Format::Prometheus, Escaping::Underscores, Arc::new(vec![family]), &mut second);
/// assert_eq!(second, "# HELP up Up.\n# TYPE up gauge\nup 0.5\n");
/// ```
#[derive(Default)]
pub struct LineCache {
    /// What the cached text was written in.
    format: Option<(Format, Escaping)>,
    /// The families last encoded: what the lines' pointers point into.
    families: Option<Arc<dyn AsRef<[MergedFamily]> + Send + Sync>>,
    /// The last encoding's text.
    text: String,
    /// Its sample lines, in the order they were written.
    lines: Vec<Line>,
}

impl std::fmt::Debug for LineCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineCache")
            .field("format", &self.format)
            .field("lines", &self.lines.len())
            .finish_non_exhaustive()
    }
}

/// One sample line of the cached text: where its name and label set are
/// (in the families the cache holds), its value's bits, and where it is in
/// the text.
#[derive(Debug)]
struct Line {
    name: usize,
    labels: usize,
    value: u64,
    /// The exemplar's address, 0 for none.
    exemplar: usize,
    start: usize,
    end: usize,
}

impl LineCache {
    /// Appends `families` in `format`, names escaped as `escaping` says, to
    /// `out`, as [`Format::encode_all`] does,
    /// copying each sample line that is the same (same name, label set and
    /// exemplar, bit for bit the same value) as the line at the same place in the last
    /// encoding of this cache, and keeps the new lines for the next one.
    pub fn encode<F>(
        &mut self,
        format: Format,
        escaping: Escaping,
        families: Arc<F>,
        out: &mut String,
    ) where
        F: AsRef<[MergedFamily]> + Send + Sync + 'static,
    {
        self.encode_families(format, escaping, families, out);
        format.push_end(out);
    }

    /// [`LineCache::encode`] without the format's end (`# EOF`), for a body
    /// that goes on with more families (see [`super::Body`]).
    pub(crate) fn encode_families<F>(
        &mut self,
        format: Format,
        escaping: Escaping,
        families: Arc<F>,
        out: &mut String,
    ) where
        F: AsRef<[MergedFamily]> + Send + Sync + 'static,
    {
        if self.format != Some((format, escaping)) {
            self.format = Some((format, escaping));
            self.text.clear();
            self.lines.clear();
        }
        let base = out.len();
        let mut lines = Lines {
            text: &self.text,
            old: &self.lines,
            new: Vec::with_capacity(self.lines.len()),
            base,
        };
        let encoded = (*families).as_ref();
        match format {
            Format::Prometheus => {
                prometheus::encode_families(encoded, escaping, out, &mut lines);
            }
            Format::OpenMetrics => {
                openmetrics::encode_families(encoded, escaping, out, &mut lines);
            }
        }
        self.lines = lines.new;
        // Kept after the comparisons: the last families stay alive until
        // then, so no pointer compared could have been reused.
        self.families = Some(families);
        self.text.clear();
        self.text.push_str(&out[base..]);
    }
}

/// Lines through a cache: the last encoding's `text` and `old` lines, the
/// lines written now in `new`, positions counted from `base` in `out`.
struct Lines<'a> {
    text: &'a str,
    old: &'a [Line],
    new: Vec<Line>,
    base: usize,
}

impl SampleLines for Lines<'_> {
    fn sample(
        &mut self,
        out: &mut String,
        sample: &MergedSample,
        format: impl FnOnce(&mut String),
    ) {
        let start = out.len();
        let value = sample.value.to_bits();
        // Addresses only, never followed.
        let name = sample.name.as_ptr() as usize;
        let labels = sample.labels.as_ptr() as usize;
        let exemplar = sample
            .exemplar
            .as_ref()
            .map_or(0, |e| Arc::as_ptr(e) as usize);
        let same = self.old.get(self.new.len()).filter(|line| {
            line.value == value
                && line.name == name
                && line.labels == labels
                && line.exemplar == exemplar
        });
        match same.and_then(|line| self.text.get(line.start..line.end)) {
            Some(text) => out.push_str(text),
            None => format(out),
        }
        self.new.push(Line {
            name,
            labels,
            value,
            exemplar,
            start: start - self.base,
            end: out.len() - self.base,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{FamilyType, LabelSet};
    use multiprom_format::Exemplar;
    use proptest::prelude::*;

    /// Every third sample with an exemplar recorded at `stamp`.
    fn families(
        values: &[f64],
        names: &[Arc<str>],
        labels: &[LabelSet],
        stamp: f64,
    ) -> Vec<MergedFamily> {
        vec![MergedFamily {
            name: "f".into(),
            help: "F.".into(),
            family_type: FamilyType::Counter,
            gauge_mode: None,
            samples: values
                .iter()
                .enumerate()
                .map(|(i, &value)| MergedSample {
                    name: Arc::clone(&names[i % names.len()]),
                    labels: Arc::clone(&labels[i % labels.len()]),
                    value,
                    exemplar: (i % 3 == 1).then(|| {
                        Arc::new(Exemplar {
                            labels: vec![("trace".into(), format!("t{i}"))],
                            value,
                            timestamp: stamp,
                        })
                    }),
                })
                .collect(),
        }]
    }

    proptest! {
        // Whatever changes between two encodings (values, which series,
        // how many), the cached encoding is the fresh one.
        #[test]
        fn a_cached_encoding_is_the_fresh_one(
            first in proptest::collection::vec(prop_oneof![Just(1.0), Just(-0.0), Just(0.0), any::<f64>()], 0..12),
            second in proptest::collection::vec(prop_oneof![Just(1.0), Just(-0.0), Just(0.0), any::<f64>()], 0..12),
            rotate in 0usize..3,
            openmetrics in any::<bool>(),
            escaping in prop_oneof![
                Just(Escaping::Underscores),
                Just(Escaping::AllowUtf8),
                Just(Escaping::Dots),
                Just(Escaping::Values),
            ],
        ) {
            let format = if openmetrics { Format::OpenMetrics } else { Format::Prometheus };
            let names: Vec<Arc<str>> = vec!["f_total".into(), "f_created".into()];
            let labels: Vec<LabelSet> = vec![
                Arc::from([]),
                Arc::from([(Arc::from("a"), Arc::from("1"))]),
                Arc::from([(Arc::from("a"), Arc::from("\"x\"\n"))]),
            ];
            let mut cache = LineCache::default();
            let mut out = String::from("before\n");
            cache.encode(format, escaping, Arc::new(families(&first, &names, &labels, 1.5)), &mut out);
            let mut rotated = labels.clone();
            rotated.rotate_left(rotate);
            let second = families(&second, &names, &rotated, 2.5);
            let mut cached = String::from("before\n");
            cache.encode(format, escaping, Arc::new(second.clone()), &mut cached);
            let mut fresh = String::from("before\n");
            format.encode_all(&[&second], escaping, &mut fresh);
            prop_assert_eq!(cached, fresh);
        }
    }
}
