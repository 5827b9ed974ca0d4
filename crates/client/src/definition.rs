//! What a registered metric is: the parts that make up its entry keys, and
//! what registering the same name again must match.

use std::fmt;

use multiprom_format::{encode_key, float_to_go_string, MetricKind, NativeHistogramConfig};

use crate::error::ClientError;
use crate::native_options::NativeHistogramOptions;
use crate::validate;

/// A validated metric definition.
#[derive(Debug, Clone, PartialEq)]
// `pub` (in a private module) because the sealed `Member` trait names it.
pub struct Definition {
    /// Family name: the name as given, with a counter's `_total` stripped.
    pub(crate) family: String,
    /// Type and gauge mode (which file the entries go to).
    pub(crate) kind: MetricKind,
    /// Help text, part of every key.
    pub(crate) help: String,
    /// Label names in the order label values are given.
    pub(crate) label_names: Vec<String>,
    /// Whether this is a labelled family (children created by label values)
    /// rather than a plain metric.
    pub(crate) labelled: bool,
    /// Histogram upper bounds, `+Inf` included; empty for other types.
    pub(crate) buckets: Vec<f64>,
    /// How a native histogram records; `None` for every other metric.
    pub(crate) native: Option<NativeHistogramConfig>,
}

impl Definition {
    /// Validates a definition the way Python's constructors do.
    pub(crate) fn new(
        name: &str,
        kind: MetricKind,
        help: &str,
        label_names: Option<&[&str]>,
        buckets: &[f64],
    ) -> Result<Definition, ClientError> {
        // Python's `_build_full_name`: "Munge to OpenMetrics".
        let family = match kind {
            MetricKind::Counter => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        validate::metric_name(family)?;
        let labelled = label_names.is_some();
        let label_names = validate::label_names(family, kind, label_names.unwrap_or_default())?;
        if labelled && label_names.is_empty() {
            return Err(ClientError::NoLabelNames {
                metric: family.to_owned(),
            });
        }
        let buckets = if kind == MetricKind::Histogram {
            validate::buckets(buckets).map_err(|reason| ClientError::InvalidBuckets {
                metric: family.to_owned(),
                reason,
            })?
        } else {
            Vec::new()
        };
        Ok(Definition {
            family: family.to_owned(),
            kind,
            help: help.to_owned(),
            label_names,
            labelled,
            buckets,
            native: None,
        })
    }

    /// Validates a native histogram: a histogram whose classic part has
    /// the buckets of `options`, or only `+Inf` (the form that marks a
    /// native-only histogram, which Python's constructor cannot make).
    pub(crate) fn native(
        name: &str,
        help: &str,
        label_names: Option<&[&str]>,
        options: &NativeHistogramOptions,
    ) -> Result<Definition, ClientError> {
        let classic = options.classic().unwrap_or(&[]);
        let mut definition = match options.classic() {
            Some(_) => Definition::new(name, MetricKind::Histogram, help, label_names, classic)?,
            // Validated with a stand-in bound, then replaced by `+Inf` alone.
            None => Definition::new(name, MetricKind::Histogram, help, label_names, &[0.0])?,
        };
        if options.classic().is_none() {
            definition.buckets = vec![f64::INFINITY];
        }
        let config = options
            .config()
            .map_err(|reason| ClientError::InvalidNativeOptions {
                metric: definition.family.clone(),
                reason,
            })?;
        definition.native = Some(config);
        Ok(definition)
    }

    /// The key of one child's native series: the `*.db` key form with the
    /// histogram's own name as family and sample, and no `le` label.
    pub(crate) fn native_key(&self, label_values: &[&str]) -> String {
        let labels = self
            .label_names
            .iter()
            .map(String::as_str)
            .zip(label_values.iter().copied());
        encode_key(&self.family, &self.family, labels, &self.help)
    }

    /// The sample names this metric exposes or clashes with, as Python's
    /// `CollectorRegistry._get_names` lists them.
    pub(crate) fn claimed_names(&self) -> Vec<String> {
        let suffixes: &[&str] = match self.kind {
            MetricKind::Counter => &["_total", "_created"],
            MetricKind::Gauge(_) => &[],
            MetricKind::Summary => &["_sum", "_count", "_created"],
            MetricKind::Histogram => &["_bucket", "_sum", "_count", "_created"],
        };
        std::iter::once(self.family.clone())
            .chain(suffixes.iter().map(|s| format!("{}{s}", self.family)))
            .collect()
    }

    /// The entry keys of one child, in the order Python creates them:
    /// counter `_total`; gauge the bare name; summary `_count`, `_sum`;
    /// histogram `_sum`, then `_bucket` per bound (no `_count`).
    pub(crate) fn keys(&self, label_values: &[&str]) -> Vec<String> {
        let fam = self.family.as_str();
        let labels = || {
            self.label_names
                .iter()
                .map(String::as_str)
                .zip(label_values.iter().copied())
        };
        let key = |sample: &str| encode_key(fam, sample, labels(), &self.help);
        match self.kind {
            MetricKind::Counter => vec![key(&format!("{fam}_total"))],
            MetricKind::Gauge(_) => vec![key(fam)],
            MetricKind::Summary => vec![key(&format!("{fam}_count")), key(&format!("{fam}_sum"))],
            MetricKind::Histogram => {
                let bucket = format!("{fam}_bucket");
                let mut keys = Vec::with_capacity(1 + self.buckets.len());
                keys.push(key(&format!("{fam}_sum")));
                for &bound in &self.buckets {
                    let le = float_to_go_string(bound);
                    keys.push(encode_key(
                        fam,
                        &bucket,
                        labels().chain([("le", le.as_str())]),
                        &self.help,
                    ));
                }
                keys
            }
        }
    }
}

impl fmt::Display for Definition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            MetricKind::Gauge(mode) => write!(f, "gauge (mode {mode})")?,
            kind => f.write_str(kind.type_name())?,
        }
        if self.labelled {
            write!(f, " family with labels {:?}", self.label_names)?;
        } else {
            f.write_str(" without labels")?;
        }
        if let Some(native) = &self.native {
            write!(
                f,
                ", native schema {} max_buckets {} zero_threshold {:e}",
                native.schema, native.max_buckets, native.zero_threshold
            )?;
        }
        if self.kind == MetricKind::Histogram {
            write!(f, ", buckets {:?}", self.buckets)?;
        }
        write!(f, ", help {:?}", self.help)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use multiprom_format::GaugeMode;

    #[test]
    fn keys_in_python_order() {
        let counter = Definition::new(
            "req_total",
            MetricKind::Counter,
            "Requests",
            Some(&["b", "a"]),
            &[],
        )
        .unwrap();
        assert_eq!(counter.family, "req");
        assert_eq!(
            counter.keys(&["2", "1"]),
            [r#"["req", "req_total", {"a": "1", "b": "2"}, "Requests"]"#]
        );
        let hist = Definition::new("lat", MetricKind::Histogram, "h", None, &[0.5, 1e6]).unwrap();
        assert_eq!(
            hist.keys(&[]),
            [
                r#"["lat", "lat_sum", {}, "h"]"#,
                r#"["lat", "lat_bucket", {"le": "0.5"}, "h"]"#,
                r#"["lat", "lat_bucket", {"le": "1e+06"}, "h"]"#,
                r#"["lat", "lat_bucket", {"le": "+Inf"}, "h"]"#,
            ]
        );
        let summary = Definition::new("s", MetricKind::Summary, "", Some(&["x"]), &[]).unwrap();
        assert_eq!(
            summary.keys(&["v"]),
            [
                r#"["s", "s_count", {"x": "v"}, ""]"#,
                r#"["s", "s_sum", {"x": "v"}, ""]"#
            ]
        );
        let gauge =
            Definition::new("g_total", MetricKind::Gauge(GaugeMode::Max), "", None, &[]).unwrap();
        assert_eq!(gauge.family, "g_total", "only counters strip _total");
        assert_eq!(gauge.keys(&[]), [r#"["g_total", "g_total", {}, ""]"#]);
    }

    #[test]
    fn claimed_names_like_python_registry() {
        let c = Definition::new("x", MetricKind::Counter, "", None, &[]).unwrap();
        assert_eq!(c.claimed_names(), ["x", "x_total", "x_created"]);
        let h = Definition::new("x", MetricKind::Histogram, "", None, &[1.0]).unwrap();
        assert_eq!(
            h.claimed_names(),
            ["x", "x_bucket", "x_sum", "x_count", "x_created"]
        );
    }

    #[test]
    fn total_alone_is_an_empty_name() {
        assert!(matches!(
            Definition::new("_total", MetricKind::Counter, "", None, &[]),
            Err(ClientError::InvalidMetricName { name }) if name.is_empty()
        ));
    }
}
