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

    /// Ends the body: `# EOF` in OpenMetrics, nothing in Prometheus. A
    /// body dropped without it is a part of one that its caller ends (the
    /// Python package writes the other collectors' families after it, then
    /// the end).
    pub fn finish(self) {
        self.format.push_end(self.out);
    }
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
        Format::OpenMetrics.encode_all(&[&*merged, &own], Escaping::Underscores, &mut openmetrics);
        assert_eq!(openmetrics.matches("# EOF").count(), 1);
        assert!(openmetrics.ends_with("c 3.0\n# EOF\n"));
    }

    // A body dropped without `finish` is a part of one: its caller ends it.
    #[test]
    fn a_body_not_finished_has_no_end() {
        let own = vec![gauge("c", 3.0)];
        let mut out = String::new();
        Body::new(Format::OpenMetrics, Escaping::Underscores, &mut out).families(&own);
        assert_eq!(out, "# HELP c H.\n# TYPE c gauge\nc 3.0\n");
    }
}
