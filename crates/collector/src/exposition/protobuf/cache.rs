//! [`ProtobufCache`]: the last protobuf encoding's families, so that a
//! scrape of a directory where little changed copies most families' bytes
//! instead of building and encoding their messages again.
//!
//! What the text formats' line cache does per sample line, this does per
//! family: a family's messages regroup its samples (a histogram's buckets,
//! `_count` and `_sum` become one metric), so a family is the smallest part
//! of the output made from a known set of samples. Building the messages
//! (a `String` per name and label, a `Vec` per metric) is most of what a
//! protobuf encoding costs, and a thousand exited workers' families do not
//! move. As in the line cache, a sample is known unchanged by the
//! addresses of its name, label set and exemplar and the bits of its
//! value (a merge plan hands every scrape the same `Arc`s for the same
//! series, and a collection the same exemplar `Arc` while it does not
//! change), and the cache holds on to the families it last encoded, so an
//! address it compares with is still theirs.
//!
//! A counter or gauge family is kept per metric too: a family of one series
//! per worker (a gauge in mode `all`) in which a few live workers' values
//! moved copies the other metrics' bytes and encodes only the moved ones.
//! Its message is put together as prost writes it (its name, help and
//! type, then each metric as field 4, the whole length-delimited).
//!
//! A histogram family's messages carry its series' native histograms too:
//! they are reused only while the collection's native histograms are equal
//! to the last ones (a value comparison: they are few, one per series, not
//! per file).

use std::ops::Range;
use std::sync::Arc;

use prost::Message;

use super::family::SingleValues;
use crate::exposition::names::Escaping;
use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::native_histograms::NativeHistograms;
use crate::StartTimes;

/// The families of the last [`ProtobufCache::encode`], to reuse.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::exposition::{encode_protobuf, ProtobufCache};
/// use multiprom_collector::{Escaping, FamilyType, MergedFamily, MergedSample, NativeHistograms};
/// let mut family = MergedFamily {
///     name: "up".into(),
///     help: "Up.".into(),
///     family_type: FamilyType::Gauge,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: "up".into(), labels: Arc::from([]), value: 1.0, exemplar: None }],
/// };
/// let natives = NativeHistograms::default();
/// let mut cache = ProtobufCache::default();
/// let mut first = Vec::new();
/// cache.encode(Arc::new(vec![family.clone()]), &natives, None, Escaping::Underscores, &mut first);
/// family.samples[0].value = 0.5;
/// let mut second = Vec::new();
/// cache.encode(Arc::new(vec![family.clone()]), &natives, None, Escaping::Underscores, &mut second);
/// let mut fresh = Vec::new();
/// encode_protobuf(&[family], &natives, None, Escaping::Underscores, &mut fresh);
/// assert_eq!(second, fresh);
/// assert_ne!(second, first);
/// ```
#[derive(Default)]
pub struct ProtobufCache {
    /// The families last encoded: what the samples' addresses point into.
    families: Option<Arc<dyn AsRef<[MergedFamily]> + Send + Sync>>,
    /// The native histograms they were encoded with.
    natives: NativeHistograms,
    /// The start times they were encoded with.
    start_times: Option<StartTimes>,
    /// How their names were escaped.
    escaping: Escaping,
    /// The last encoding's bytes.
    bytes: Vec<u8>,
    /// Each family's place in them and in `samples`, in order.
    encoded: Vec<EncodedFamily>,
    /// The samples of every family, in order.
    samples: Vec<SampleMark>,
    /// Where each sample's metric is in `bytes`, in order with `samples`
    /// (empty for a sample of a family encoded whole).
    metrics: Vec<Range<usize>>,
    /// The metrics of this encoding not taken from the last one.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for ProtobufCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtobufCache")
            .field("families", &self.encoded.len())
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

/// One family of the cached encoding.
#[derive(Debug)]
struct EncodedFamily {
    /// Addresses of its name and help (in the families the cache holds).
    name: usize,
    help: usize,
    family_type: FamilyType,
    /// Its samples in [`ProtobufCache::samples`].
    samples: Range<usize>,
    /// Its messages in [`ProtobufCache::bytes`].
    bytes: Range<usize>,
}

/// What tells a sample unchanged: the addresses of its name, label set and
/// exemplar (0 for none), and its value's bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SampleMark {
    name: usize,
    labels: usize,
    exemplar: usize,
    value: u64,
}

impl SampleMark {
    fn of(sample: &MergedSample) -> Self {
        // Addresses only, never followed.
        SampleMark {
            name: sample.name.as_ptr() as usize,
            labels: sample.labels.as_ptr() as usize,
            exemplar: sample
                .exemplar
                .as_ref()
                .map_or(0, |e| Arc::as_ptr(e) as usize),
            value: sample.value.to_bits(),
        }
    }
}

impl ProtobufCache {
    /// Appends `families` with their native histograms from `natives` to
    /// `out`, as [`encode_protobuf`](super::encode_protobuf)
    /// does, copying the bytes of each family that is the same (same name,
    /// help and type, and samples with the same names, label sets and
    /// exemplars and bit for bit the same values, in the same order) as the
    /// family at the same place in this cache's last encoding, when
    /// `natives` are the same too or the family is no histogram, and
    /// `escaping` is the same. Keeps the new encoding for the next one.
    pub fn encode<F>(
        &mut self,
        families: Arc<F>,
        natives: &NativeHistograms,
        start_times: Option<&StartTimes>,
        escaping: Escaping,
        out: &mut Vec<u8>,
    ) where
        F: AsRef<[MergedFamily]> + Send + Sync + 'static,
    {
        // Start times change rarely (a series reset): then every family
        // is encoded afresh.
        if escaping != self.escaping || start_times != self.start_times.as_ref() {
            self.encoded.clear();
            self.escaping = escaping;
            self.start_times = start_times.cloned();
        }
        let same_natives = *natives == self.natives;
        let base = out.len();
        let mut encoded = Vec::with_capacity(self.encoded.len());
        let mut samples = Vec::with_capacity(self.samples.len());
        let mut metrics = Vec::with_capacity(self.metrics.len());
        for (at, family) in (*families).as_ref().iter().enumerate() {
            let start = out.len();
            let first_sample = samples.len();
            samples.extend(family.samples.iter().map(SampleMark::of));
            let marks = &samples[first_sample..];
            let name = family.name.as_ptr() as usize;
            let help = family.help.as_ptr() as usize;
            let old = self.encoded.get(at).filter(|old| {
                old.name == name && old.help == help && old.family_type == family.family_type
            });
            let whole = old.filter(|old| {
                (same_natives || family.family_type != FamilyType::Histogram)
                    && self.samples.get(old.samples.clone()) == Some(marks)
            });
            match whole.and_then(|old| Some((old, self.bytes.get(old.bytes.clone())?))) {
                Some((old, bytes)) => {
                    out.extend_from_slice(bytes);
                    // The same metrics, moved with the family.
                    let shift = |r: &Range<usize>| {
                        if r.is_empty() {
                            0..0
                        } else {
                            r.start - old.bytes.start + (start - base)
                                ..r.end - old.bytes.start + (start - base)
                        }
                    };
                    metrics.extend(self.metrics[old.samples.clone()].iter().map(shift));
                }
                None => match SingleValues::of(family, escaping) {
                    Some(parts) => {
                        let kept = old.map_or(0..0, |old| old.samples.clone());
                        let kept = (kept, marks);
                        self.encode_metrics(
                            family,
                            &parts,
                            kept,
                            start_times,
                            base,
                            out,
                            &mut metrics,
                        );
                    }
                    None => {
                        super::encode_family(family, natives, start_times, escaping, out);
                        metrics.extend(family.samples.iter().map(|_| 0..0));
                    }
                },
            }
            encoded.push(EncodedFamily {
                name,
                help,
                family_type: family.family_type,
                samples: first_sample..samples.len(),
                bytes: start - base..out.len() - base,
            });
        }
        self.metrics = metrics;
        self.encoded = encoded;
        self.samples = samples;
        // Kept after the comparisons: the last families stay alive until
        // then, so no address compared could have been reused.
        self.families = Some(families);
        if !same_natives {
            self.natives = natives.clone();
        }
        self.bytes.clear();
        self.bytes.extend_from_slice(&out[base..]);
    }
}

impl ProtobufCache {
    /// Appends the one message of a counter or gauge `family` (see
    /// [`SingleValues`]), copying from the last encoding the metric of each
    /// sample whose mark is the one at the same place among `kept` (the
    /// last encoding's samples of the family at this place), encoding the
    /// others; records where each metric went in `metrics`.
    #[allow(clippy::too_many_arguments)]
    fn encode_metrics(
        &mut self,
        family: &MergedFamily,
        parts: &SingleValues,
        (kept, marks): (Range<usize>, &[SampleMark]),
        start_times: Option<&StartTimes>,
        base: usize,
        out: &mut Vec<u8>,
        metrics: &mut Vec<Range<usize>>,
    ) {
        let old_marks = self.samples.get(kept.clone()).unwrap_or(&[]);
        let old_metrics = self.metrics.get(kept).unwrap_or(&[]);
        // Each sample's metric: in the last encoding's bytes, or in scratch.
        let mut placed: Vec<(bool, Range<usize>)> = Vec::with_capacity(marks.len());
        self.scratch.clear();
        let mut length = parts.header.encoded_len();
        for (i, (sample, mark)) in family.samples.iter().zip(marks).enumerate() {
            let reuse = old_marks
                .get(i)
                .zip(old_metrics.get(i))
                .filter(|(old, range)| *old == mark && !range.is_empty())
                .and_then(|(_, range)| self.bytes.get(range.clone()).map(|_| range.clone()));
            let range = match reuse {
                Some(range) => (true, range),
                None => {
                    let from = self.scratch.len();
                    prost::encoding::message::encode(
                        4,
                        &parts.metric(family, sample, start_times),
                        &mut self.scratch,
                    );
                    (false, from..self.scratch.len())
                }
            };
            length += range.1.len();
            placed.push(range);
        }
        prost::encoding::encode_varint(length as u64, out);
        // Cannot fail: prost fails only for a buffer without room left,
        // and a Vec grows.
        let _ = parts.header.encode(out);
        for (old, range) in placed {
            let from = if old { &self.bytes } else { &self.scratch };
            let at = out.len() - base;
            out.extend_from_slice(&from[range.clone()]);
            metrics.push(at..at + range.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use multiprom_format::{Exemplar, NativeHistogram};
    use proptest::prelude::*;

    use super::*;
    use crate::exposition::protobuf::encode_protobuf;
    use crate::family::LabelSet;
    use crate::native_histograms::series_key;

    /// The names, help texts and label sets of the families, made once:
    /// a collection hands every scrape the same `Arc`s for them.
    struct Parts {
        texts: [Arc<str>; 8],
        /// Label sets: each one's own, and with `le="1.0"`, `le="+Inf"`.
        labels: Vec<[LabelSet; 3]>,
    }

    impl Parts {
        fn new() -> Parts {
            let texts = [
                "requests",
                "Requests.",
                "requests_total",
                "latency",
                "Latency.",
                "latency_bucket",
                "latency_count",
                "latency_sum",
            ]
            .map(Arc::from);
            let sets: [&[(&str, &str)]; 3] = [&[], &[("a", "1")], &[("a", "\"x\"\n")]];
            let labels = sets
                .iter()
                .map(|set| {
                    let with = |le: Option<&str>| -> LabelSet {
                        let mut labels: Vec<(Arc<str>, Arc<str>)> = set
                            .iter()
                            .map(|&(n, v)| (Arc::from(n), Arc::from(v)))
                            .collect();
                        labels.extend(le.map(|le| (Arc::from("le"), Arc::from(le))));
                        labels.into()
                    };
                    [with(None), with(Some("1.0")), with(Some("+Inf"))]
                })
                .collect();
            Parts { texts, labels }
        }

        /// A counter family of `counts` (every other sample with an
        /// exemplar, `exemplars[i]` for sample `i`) and a histogram family
        /// of one series per label set (rotated by `rotate`), observing
        /// `observed` in its bucket `le="1.0"` or `+Inf`.
        fn families(
            &self,
            counts: &[f64],
            exemplars: &[Arc<Exemplar>],
            observed: &[f64],
            rotate: usize,
        ) -> Vec<MergedFamily> {
            let t = |n: usize| Arc::clone(&self.texts[n]);
            let set = |i: usize| &self.labels[(i + rotate) % self.labels.len()];
            let sample = |name: usize, labels: &LabelSet, value: f64| MergedSample {
                name: t(name),
                labels: Arc::clone(labels),
                value,
                exemplar: None,
            };
            let counter = MergedFamily {
                name: t(0),
                help: t(1),
                family_type: FamilyType::Counter,
                gauge_mode: None,
                samples: counts
                    .iter()
                    .enumerate()
                    .map(|(i, &value)| MergedSample {
                        exemplar: (i % 2 == 1).then(|| Arc::clone(&exemplars[i])),
                        ..sample(2, &set(i)[0], value)
                    })
                    .collect(),
            };
            let mut samples = Vec::new();
            for (i, &value) in observed.iter().enumerate() {
                let [own, one, inf] = set(i);
                samples.push(sample(5, one, f64::from(u8::from(value <= 1.0))));
                samples.push(sample(5, inf, 1.0));
                samples.push(sample(6, own, 1.0));
                samples.push(sample(7, own, value));
            }
            let histogram = MergedFamily {
                name: t(3),
                help: t(4),
                family_type: FamilyType::Histogram,
                gauge_mode: None,
                samples,
            };
            vec![counter, histogram]
        }

        /// The native histogram of each series of `latency`, observing
        /// `observed`.
        fn natives(&self, observed: &[f64], rotate: usize) -> NativeHistograms {
            let mut natives = NativeHistograms::default();
            for (i, &value) in observed.iter().enumerate() {
                let set = &self.labels[(i + rotate) % self.labels.len()][0];
                let mut key = Vec::new();
                series_key(&mut key, "latency", set.iter().map(|(n, v)| (&**n, &**v)));
                let mut histogram = NativeHistogram::empty(3, 0.0);
                histogram.sum = value;
                // A bucket that moves with the value: with a count equal to
                // the classic one, the classic sum is sent, so a change of
                // the native sum alone would not show.
                histogram
                    .positive
                    .push((((value.to_bits() >> 48) % 16) as i32, 1));
                natives.merge(&Arc::from(key), histogram, &mut Vec::new());
            }
            natives
        }
    }

    fn exemplars(stamp: f64) -> Vec<Arc<Exemplar>> {
        (0..6)
            .map(|i| {
                Arc::new(Exemplar {
                    labels: vec![("trace".into(), format!("t{i}"))],
                    value: 1.0,
                    timestamp: stamp,
                })
            })
            .collect()
    }

    /// Up to six values, or (`None`) the ones before.
    fn values() -> impl Strategy<Value = Option<Vec<f64>>> {
        proptest::option::of(proptest::collection::vec(
            prop_oneof![Just(0.5), Just(2.0), Just(-0.0), Just(0.0), any::<f64>()],
            0..6,
        ))
    }

    proptest! {
        // Whatever changes between two encodings (values, exemplars,
        // native histograms, which series, how many), the cached encoding
        // is the fresh one.
        #[test]
        fn a_cached_encoding_is_the_fresh_one(
            counts in values(),
            observed in values(),
            next_counts in values(),
            next_observed in values(),
            rotate in 0usize..3,
            new_exemplars in any::<bool>(),
            with_natives in any::<(bool, bool)>(),
        ) {
            let parts = Parts::new();
            let counts = counts.unwrap_or_default();
            let observed = observed.unwrap_or_default();
            let next_counts = next_counts.unwrap_or_else(|| counts.clone());
            let next_observed = next_observed.unwrap_or_else(|| observed.clone());
            let natives_of = |on: bool, observed: &[f64], rotate: usize| {
                if on { parts.natives(observed, rotate) } else { NativeHistograms::default() }
            };
            let first_exemplars = exemplars(1.5);
            let mut cache = ProtobufCache::default();
            let mut out = b"before".to_vec();
            let first = parts.families(&counts, &first_exemplars, &observed, 0);
            cache.encode(Arc::new(first), &natives_of(with_natives.0, &observed, 0), None, Escaping::Underscores, &mut out);
            let next_exemplars = if new_exemplars { exemplars(2.5) } else { first_exemplars };
            let second = parts.families(&next_counts, &next_exemplars, &next_observed, rotate);
            let second_natives = natives_of(with_natives.1, &next_observed, rotate);
            let mut fresh = b"before".to_vec();
            encode_protobuf(&second, &second_natives, None, Escaping::Underscores, &mut fresh);
            let mut cached = b"before".to_vec();
            cache.encode(Arc::new(second), &second_natives, None, Escaping::Underscores, &mut cached);
            prop_assert_eq!(cached, fresh);
        }
    }

    #[test]
    fn unchanged_families_are_copied_and_new_natives_or_help_encoded_again() {
        let parts = Parts::new();
        let families = Arc::new(parts.families(&[3.0], &exemplars(1.5), &[0.5], 1));
        let mut cache = ProtobufCache::default();
        let mut first = Vec::new();
        cache.encode(
            Arc::clone(&families),
            &parts.natives(&[0.5], 1),
            None,
            Escaping::Underscores,
            &mut first,
        );
        assert_eq!(cache.encoded.len(), 2);
        // The same families again: every byte copied.
        let mut again = Vec::new();
        cache.encode(
            Arc::clone(&families),
            &parts.natives(&[0.5], 1),
            None,
            Escaping::Underscores,
            &mut again,
        );
        assert_eq!(again, first);
        // Only the native histogram moved: the histogram family changes.
        let moved = parts.natives(&[0.75], 1);
        let mut cached = Vec::new();
        cache.encode(
            Arc::clone(&families),
            &moved,
            None,
            Escaping::Underscores,
            &mut cached,
        );
        let mut fresh = Vec::new();
        encode_protobuf(&families, &moved, None, Escaping::Underscores, &mut fresh);
        assert_eq!(cached, fresh);
        assert_ne!(cached, first);
        // The same samples under a new help text: encoded again.
        let mut helped = (*families).clone();
        helped[0].help = "Requests served.".into();
        let mut cached = Vec::new();
        cache.encode(
            Arc::new(helped.clone()),
            &moved,
            None,
            Escaping::Underscores,
            &mut cached,
        );
        let mut fresh = Vec::new();
        encode_protobuf(&helped, &moved, None, Escaping::Underscores, &mut fresh);
        assert_eq!(cached, fresh);
    }
}
