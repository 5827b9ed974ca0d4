//! A family's `MetricMetadata`, as Prometheus records a scraped family's.

use multiprom_collector::{FamilyType, MergedFamily};

use super::prometheus::metric_metadata::MetricType;
use super::prometheus::MetricMetadata;

/// The metadata of `family`: its type, help, and name as Prometheus
/// records it from the directory's text format 0.0.4 or protobuf
/// exposition (a counter's with its `_total`: the `# TYPE` line's name as
/// `prometheus_client` writes it, and the protobuf family's).
pub(super) fn metadata(family: &MergedFamily) -> MetricMetadata {
    let (metric_type, suffix) = match family.family_type {
        FamilyType::Counter => (MetricType::Counter, "_total"),
        FamilyType::Gauge => (MetricType::Gauge, ""),
        FamilyType::Histogram => (MetricType::Histogram, ""),
        FamilyType::Summary => (MetricType::Summary, ""),
    };
    MetricMetadata {
        r#type: metric_type as i32,
        metric_family_name: format!("{}{suffix}", family.name),
        help: family.help.to_string(),
        // prometheus_client's multiprocess files keep no unit.
        unit: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(family_type: FamilyType) -> MergedFamily {
        MergedFamily {
            name: "requests".into(),
            help: "Requests served.".into(),
            family_type,
            gauge_mode: None,
            samples: Vec::new(),
        }
    }

    #[test]
    fn a_counter_is_recorded_with_its_total() {
        let metadata = metadata(&family(FamilyType::Counter));
        assert_eq!(metadata.r#type(), MetricType::Counter);
        assert_eq!(metadata.metric_family_name, "requests_total");
        assert_eq!(metadata.help, "Requests served.");
        assert_eq!(metadata.unit, "");
    }

    #[test]
    fn other_families_by_their_name() {
        for (family_type, metric_type) in [
            (FamilyType::Gauge, MetricType::Gauge),
            (FamilyType::Histogram, MetricType::Histogram),
            (FamilyType::Summary, MetricType::Summary),
        ] {
            let metadata = metadata(&family(family_type));
            assert_eq!(metadata.r#type(), metric_type);
            assert_eq!(metadata.metric_family_name, "requests");
        }
    }
}
