//! Metric and label name rules.
//!
//! Prometheus' classic ("legacy") rules only. `prometheus_client` 0.26 accepts
//! any UTF-8 name unless `PROMETHEUS_LEGACY_NAME_VALIDATION` is set, but such
//! names need quoting in the exposition formats and are unscrapable by
//! Prometheus servers before 3.0, so this crate refuses them: every name it
//! accepts, Python accepts under either setting.

use crate::error::{BucketsError, ClientError};
use multiprom_format::{check_exemplar_labels, MetricKind};

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
pub(crate) fn metric_name(name: &str) -> Result<(), ClientError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if ok {
        Ok(())
    } else {
        Err(ClientError::InvalidMetricName {
            name: name.to_owned(),
        })
    }
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`
fn is_label_name(label: &str) -> bool {
    let mut chars = label.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An exemplar's labels, as `prometheus_client` checks them: each name a
/// label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not `__*`; Python's dict has no
/// repeats, so neither may these), names and values together at most 128
/// code points.
pub(crate) fn exemplar_labels(metric: &str, labels: &[(&str, &str)]) -> Result<(), ClientError> {
    for (at, &(label, _)) in labels.iter().enumerate() {
        if !is_label_name(label) {
            return Err(ClientError::InvalidLabelName {
                metric: metric.to_owned(),
                label: label.to_owned(),
            });
        }
        if label.starts_with("__") {
            return Err(ClientError::ReservedLabelName {
                metric: metric.to_owned(),
                label: label.to_owned(),
                reason: "names starting with __ are reserved for Prometheus",
            });
        }
        if labels[..at].iter().any(|&(seen, _)| seen == label) {
            return Err(ClientError::DuplicateLabelName {
                metric: metric.to_owned(),
                label: label.to_owned(),
            });
        }
    }
    check_exemplar_labels(labels.iter().copied()).map_err(|reason| ClientError::InvalidExemplar {
        metric: metric.to_owned(),
        reason,
    })
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not `__*`, not reserved for the type, no repeats.
pub(crate) fn label_names(
    metric: &str,
    kind: MetricKind,
    names: &[&str],
) -> Result<Vec<String>, ClientError> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for &label in names {
        if !is_label_name(label) {
            return Err(ClientError::InvalidLabelName {
                metric: metric.to_owned(),
                label: label.to_owned(),
            });
        }
        let reserved = |reason| ClientError::ReservedLabelName {
            metric: metric.to_owned(),
            label: label.to_owned(),
            reason,
        };
        if label.starts_with("__") {
            return Err(reserved(
                "names starting with __ are reserved for Prometheus",
            ));
        }
        match (kind, label) {
            (MetricKind::Histogram, "le") => {
                return Err(reserved("histograms use le for their bucket bounds"))
            }
            (MetricKind::Summary, "quantile") => {
                return Err(reserved("summaries use quantile for their quantiles"))
            }
            (MetricKind::Gauge(_), "pid") => {
                return Err(reserved(
                    "the multiprocess collector sets pid on gauges (all, liveall) or drops it (other modes)",
                ))
            }
            _ => {}
        }
        if out.iter().any(|seen| seen == label) {
            return Err(ClientError::DuplicateLabelName {
                metric: metric.to_owned(),
                label: label.to_owned(),
            });
        }
        out.push(label.to_owned());
    }
    Ok(out)
}

/// Python's `Histogram._prepare_buckets`, stricter on NaN and repeats.
pub(crate) fn buckets(bounds: &[f64]) -> Result<Vec<f64>, BucketsError> {
    if bounds.iter().any(|b| b.is_nan()) {
        return Err(BucketsError::NaN);
    }
    for pair in bounds.windows(2) {
        if pair[0] > pair[1] {
            return Err(BucketsError::NotSorted);
        }
        if pair[0] == pair[1] {
            return Err(BucketsError::Duplicate);
        }
    }
    let mut out = bounds.to_vec();
    if out.last().is_some_and(|&last| last != f64::INFINITY) {
        out.push(f64::INFINITY);
    }
    if out.len() < 2 {
        return Err(BucketsError::TooFew);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use multiprom_format::GaugeMode;

    #[test]
    fn metric_names() {
        for good in ["a", "_a", ":a", "a:b_c9", "A"] {
            metric_name(good).unwrap();
        }
        for bad in ["", "9a", "a-b", "a.b", "é", "a b"] {
            assert!(
                matches!(metric_name(bad), Err(ClientError::InvalidMetricName { name }) if name == bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn label_name_rules() {
        let ok = label_names(
            "m",
            MetricKind::Counter,
            &["a", "_b", "le", "quantile", "pid"],
        )
        .unwrap();
        assert_eq!(ok, ["a", "_b", "le", "quantile", "pid"]);
        let err = |t, names: &[&str]| label_names("m", t, names).unwrap_err();
        assert!(
            matches!(err(MetricKind::Counter, &["a:b"]), ClientError::InvalidLabelName { label, .. } if label == "a:b")
        );
        assert!(matches!(
            err(MetricKind::Counter, &["9"]),
            ClientError::InvalidLabelName { .. }
        ));
        assert!(matches!(
            err(MetricKind::Counter, &[""]),
            ClientError::InvalidLabelName { .. }
        ));
        assert!(
            matches!(err(MetricKind::Counter, &["__x"]), ClientError::ReservedLabelName { label, .. } if label == "__x")
        );
        assert!(matches!(
            err(MetricKind::Histogram, &["le"]),
            ClientError::ReservedLabelName { .. }
        ));
        assert!(matches!(
            err(MetricKind::Summary, &["quantile"]),
            ClientError::ReservedLabelName { .. }
        ));
        assert!(matches!(
            err(MetricKind::Gauge(GaugeMode::LiveSum), &["pid"]),
            ClientError::ReservedLabelName { .. }
        ));
        assert!(
            matches!(err(MetricKind::Gauge(GaugeMode::LiveSum), &["a", "a"]), ClientError::DuplicateLabelName { label, .. } if label == "a")
        );
        // Only the type's own reserved name is refused.
        label_names("m", MetricKind::Histogram, &["quantile", "pid"]).unwrap();
        label_names("m", MetricKind::Summary, &["le"]).unwrap();
    }

    #[test]
    fn bucket_rules() {
        let inf = f64::INFINITY;
        assert_eq!(buckets(&[1.0, 2.0]).unwrap(), [1.0, 2.0, inf]);
        assert_eq!(buckets(&[1.0, inf]).unwrap(), [1.0, inf]);
        assert_eq!(buckets(&[1.0]).unwrap(), [1.0, inf]);
        assert_eq!(
            buckets(&[f64::NEG_INFINITY]).unwrap(),
            [f64::NEG_INFINITY, inf]
        );
        assert_eq!(buckets(&[]), Err(BucketsError::TooFew));
        assert_eq!(buckets(&[inf]), Err(BucketsError::TooFew));
        assert_eq!(buckets(&[2.0, 1.0]), Err(BucketsError::NotSorted));
        assert_eq!(buckets(&[1.0, 1.0]), Err(BucketsError::Duplicate));
        assert_eq!(buckets(&[1.0, f64::NAN]), Err(BucketsError::NaN));
    }
}
