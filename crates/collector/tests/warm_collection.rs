//! A warm collection of an unchanged directory reuses the merge plan, also
//! when the directory holds more label tuples than the interner's sweep
//! threshold (thousands of `gauge` files in mode `all`, each sample with its
//! own `pid` label).

use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};

#[test]
fn unchanged_directory_reuses_the_plan() {
    let dir = tempfile::tempdir().expect("a temp dir");
    for pid in 0..600 {
        let name = FileName::new(MetricKind::Gauge(GaugeMode::All), pid.to_string()).unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        for route in 0..10 {
            let route = format!("/route{route}");
            let key = encode_key("busy", "busy", [("route", route.as_str())], "Busy.");
            writer.slot(&key).unwrap().set(f64::from(pid));
        }
    }
    let collector = DirCollector::new(dir.path());
    let first = collector.collect().unwrap();
    assert!(first.stats.planned, "the first collection works out a plan");
    assert_eq!(first.stats.series, 6_000);
    for collection in 2..=4 {
        let warm = collector.collect().unwrap();
        assert_eq!(warm.stats.series, 6_000);
        assert!(
            !warm.stats.planned,
            "collection {collection} of an unchanged directory planned the merge again"
        );
    }
}
