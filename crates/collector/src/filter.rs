//! [`NameFilter`]: the sample names a scrape asks for (`?name[]=`).

use std::collections::BTreeSet;

use crate::family::MergedFamily;

/// Keeps only the samples whose name is one of a set: `prometheus_client`'s
/// `CollectorRegistry.restricted_registry(names)`, which its HTTP handlers
/// apply for `GET /metrics?name[]=a&name[]=b`.
///
/// A sample is kept when its name (`requests_total`, `latency_bucket`,
/// `latency_sum`, a gauge's name, ...) is one of the names; a family none of
/// whose samples is kept is left out; what is kept is the family as it
/// was, with fewer samples, in the same order (Python's
/// `Metric._restricted_metric`). Names that match nothing are no error:
/// they select nothing.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::{FamilyType, Format, MergedFamily, MergedSample, NameFilter};
/// let sample = |name: &str, le: &str, value| MergedSample {
///     name: name.into(),
///     labels: Arc::from([("le".into(), le.into())]),
///     value,
///     exemplar: None,
/// };
/// let latency = MergedFamily {
///     name: "latency".into(),
///     help: "Latency.".into(),
///     family_type: FamilyType::Histogram,
///     gauge_mode: None,
///     samples: vec![sample("latency_bucket", "1.0", 2.0), sample("latency_bucket", "+Inf", 3.0)],
/// };
/// let filter = NameFilter::new(["latency_bucket", "vllm:num_requests_waiting"]);
/// let mut out = String::new();
/// Format::Prometheus.encode(&filter.restrict(vec![latency]), &mut out);
/// assert_eq!(out, "# HELP latency Latency.\n# TYPE latency histogram\n\
///                  latency_bucket{le=\"1.0\"} 2.0\nlatency_bucket{le=\"+Inf\"} 3.0\n");
/// assert!(NameFilter::new(["latency_count"]).restrict(vec![]).is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NameFilter {
    // Ordered, so that two requests naming the same samples in another
    // order or with repeats are one filter (and share a collection).
    names: BTreeSet<Box<str>>,
}

impl NameFilter {
    /// A filter that keeps the samples named `names`.
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        NameFilter {
            names: names.into_iter().map(|n| Box::from(n.as_ref())).collect(),
        }
    }

    /// Whether a sample named `name` is kept.
    #[must_use]
    pub fn keeps(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(AsRef::as_ref)
    }

    /// `families` with only the samples this filter keeps, families left
    /// with none left out.
    #[must_use]
    pub fn restrict(&self, families: Vec<MergedFamily>) -> Vec<MergedFamily> {
        families
            .into_iter()
            .filter_map(|mut family| {
                family.samples.retain(|sample| self.keeps(&sample.name));
                (!family.samples.is_empty()).then_some(family)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{FamilyType, MergedSample};
    use std::sync::Arc;

    fn family(name: &str, samples: &[&str]) -> MergedFamily {
        MergedFamily {
            name: name.into(),
            help: "h".into(),
            family_type: FamilyType::Counter,
            gauge_mode: None,
            samples: samples
                .iter()
                .map(|s| MergedSample {
                    name: (*s).into(),
                    labels: Arc::from([]),
                    value: 1.0,
                    exemplar: None,
                })
                .collect(),
        }
    }

    #[test]
    fn keeps_named_samples_in_order_and_drops_emptied_families() {
        let filter = NameFilter::new(["a_total", "c", "a_total", "nope"]);
        let kept = filter.restrict(vec![
            family("a", &["a_total", "a_created", "a_total"]),
            family("b", &["b_total"]),
            family("c", &["c"]),
        ]);
        let names: Vec<Vec<&str>> = kept
            .iter()
            .map(|f| f.samples.iter().map(|s| &*s.name).collect())
            .collect();
        assert_eq!(names, [vec!["a_total", "a_total"], vec!["c"]]);
        assert_eq!(kept[0].name.as_ref(), "a");
    }

    #[test]
    fn same_names_in_any_order_are_one_filter() {
        assert_eq!(
            NameFilter::new(["x", "y", "x"]),
            NameFilter::new(["y", "x"])
        );
        assert_ne!(NameFilter::new(["x"]), NameFilter::new(["x_total"]));
    }
}
