//! [`Body`]: one exposition body from several lists of families, such as
//! a directory's merged families followed by the server's own metrics.
//! OpenMetrics allows one `# EOF`, at the very end; a body written list by
//! list through the single-list encoders would have one after each.

use std::sync::Arc;

use super::format::Format;
use super::line_cache::LineCache;
use super::names::Escaping;
use crate::family::MergedFamily;

/// A body being written to a `String`, list of families by list, ended
/// once by [`Body::finish`] (which writes OpenMetrics' `# EOF`).
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::exposition::{Body, LineCache};
/// use multiprom_collector::{Escaping, FamilyType, Format, MergedFamily, MergedSample};
/// let gauge = |name: &str, value: f64| MergedFamily {
///     name: name.into(),
///     help: "Help.".into(),
///     family_type: FamilyType::Gauge,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: name.into(), labels: Arc::from([]), value, exemplar: None }],
/// };
/// let merged = Arc::new(vec![gauge("workers", 4.0)]);
/// let own = vec![gauge("multiprom_up", 1.0)];
/// let mut cache = LineCache::default();
/// let mut out = String::new();
/// let mut body = Body::new(Format::OpenMetrics, Escaping::Underscores, &mut out);
/// body.cached(&mut cache, merged).families(&own);
/// body.finish();
/// assert_eq!(out, "\
/// ## HELP workers Help.
/// ## TYPE workers gauge
/// workers 4.0
/// ## HELP multiprom_up Help.
/// ## TYPE multiprom_up gauge
/// multiprom_up 1.0
/// ## EOF
/// ");
/// ```
#[derive(Debug)]
pub struct Body<'a> {
    format: Format,
    escaping: Escaping,
    out: &'a mut String,
}

impl<'a> Body<'a> {
    /// A body in `format`, names escaped as `escaping` says, appended to
    /// `out`.
    pub fn new(format: Format, escaping: Escaping, out: &'a mut String) -> Self {
        Body {
            format,
            escaping,
            out,
        }
    }

    /// Appends `families`.
    pub fn families(&mut self, families: &[MergedFamily]) -> &mut Self {
        self.format
            .encode_families(families, self.escaping, self.out);
        self
    }

    /// Appends `families` through `cache` (see [`LineCache::encode`]).
    pub fn cached<F>(&mut self, cache: &mut LineCache, families: Arc<F>) -> &mut Self
    where
        F: AsRef<[MergedFamily]> + Send + Sync + 'static,
    {
        cache.encode_families(self.format, self.escaping, families, self.out);
        self
    }

    /// Ends the body: `# EOF` in OpenMetrics, nothing in Prometheus.
    pub fn finish(self) {
        self.format.push_end(self.out);
    }
}

/// Appends the families of every list of `lists`, in order, in OpenMetrics
/// 1.0.0, ending with one `# EOF` after the last.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::exposition::encode_openmetrics_all;
/// use multiprom_collector::{FamilyType, MergedFamily, MergedSample};
/// let counter = |name: &str, value: f64| MergedFamily {
///     name: name.into(),
///     help: "Help.".into(),
///     family_type: FamilyType::Counter,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: format!("{name}_total").into(), labels: Arc::from([]), value, exemplar: None }],
/// };
/// let merged = vec![counter("requests", 3.0)];
/// let own = vec![counter("multiprom_scrapes", 1.0)];
/// let mut out = String::new();
/// encode_openmetrics_all(&[&merged, &own], &mut out);
/// assert_eq!(out, "\
/// ## HELP requests Help.
/// ## TYPE requests counter
/// requests_total 3.0
/// ## HELP multiprom_scrapes Help.
/// ## TYPE multiprom_scrapes counter
/// multiprom_scrapes_total 1.0
/// ## EOF
/// ");
/// ```
pub fn encode_openmetrics_all<L: AsRef<[MergedFamily]>>(lists: &[L], out: &mut String) {
    Format::OpenMetrics.encode_all(lists, Escaping::Underscores, out);
}

/// Appends the families of every list of `lists`, in order, in Prometheus
/// text format 0.0.4 (which has no end line: the same as encoding each list
/// in turn).
pub fn encode_prometheus_all<L: AsRef<[MergedFamily]>>(lists: &[L], out: &mut String) {
    Format::Prometheus.encode_all(lists, Escaping::Underscores, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{FamilyType, MergedSample};

    fn gauge(name: &str, value: f64) -> MergedFamily {
        MergedFamily {
            name: name.into(),
            help: "H.".into(),
            family_type: FamilyType::Gauge,
            gauge_mode: None,
            samples: vec![MergedSample {
                name: name.into(),
                labels: Arc::from([]),
                value,
                exemplar: None,
            }],
        }
    }

    // A body written through a line cache, twice (the second copying the
    // cached lines), then with a fresh list, is the one-call encoding.
    #[test]
    fn a_body_through_a_cache_is_the_one_call_encoding() {
        let merged = Arc::new(vec![gauge("a", 1.0), gauge("b", 2.0)]);
        let own = vec![gauge("c", 3.0)];
        for format in [Format::OpenMetrics, Format::Prometheus] {
            let mut cache = LineCache::default();
            let mut expected = String::new();
            format.encode_all(
                &[merged.as_slice(), own.as_slice()],
                Escaping::Underscores,
                &mut expected,
            );
            for _ in 0..2 {
                let mut out = String::new();
                let mut body = Body::new(format, Escaping::Underscores, &mut out);
                body.cached(&mut cache, Arc::clone(&merged)).families(&own);
                body.finish();
                assert_eq!(out, expected);
            }
        }
        let mut openmetrics = String::new();
        encode_openmetrics_all(&[&*merged, &own], &mut openmetrics);
        assert_eq!(openmetrics.matches("# EOF").count(), 1);
        assert!(openmetrics.ends_with("c 3.0\n# EOF\n"));
    }
}
