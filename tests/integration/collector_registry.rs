//! The prometheus-client adapter (`RegistryCollector`): a Rust host's own
//! `Registry`, with its own metrics, serving a directory written by real
//! Python workers. Exact text, as `prometheus_client::encoding::text::encode`
//! prints it (see the adapter's docs for what differs from Python's output
//! and why).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;

use multiprom_collector::RegistryCollector;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::harness::{run_python, temp_dir};

const ENV: &str = "PROMETHEUS_MULTIPROC_DIR";

/// What the adapter adds for the directory the Python writer makes, with
/// `prefix` (a sub-registry's) and `const_label` (a sub-registry's label).
fn python_families(prefix: &str, const_label: &str) -> String {
    let labels = |rest: &str| match (const_label.is_empty(), rest.is_empty()) {
        (true, true) => String::new(),
        (true, false) => format!("{{{rest}}}"),
        (false, true) => format!("{{{const_label}}}"),
        (false, false) => format!("{{{const_label},{rest}}}"),
    };
    let p = prefix;
    [
        format!("# HELP {p}jobs Jobs \\\"done\\\"\\nall\n"),
        format!("# TYPE {p}jobs counter\n"),
        format!("{p}jobs_total{} 3.0\n", labels(r#"queue="a\"b\\c\nd""#)),
        format!("# HELP {p}temp Temp.\n# TYPE {p}temp gauge\n"),
        format!("{p}temp{} 1.5\n", labels(r#"pid="11",w="x""#)),
        format!("{p}temp{} 1.5\n", labels(r#"pid="12",w="x""#)),
        format!("# HELP {p}busy Busy.\n# TYPE {p}busy gauge\n"),
        format!("{p}busy{} 2.0\n", labels("")),
        format!("# HELP {p}wait_seconds Wait.\n# TYPE {p}wait_seconds histogram\n"),
        format!("{p}wait_seconds_sum{} 2000000.25\n", labels("")),
        format!("{p}wait_seconds_count{} 2\n", labels("")),
        format!("{p}wait_seconds_bucket{} 1\n", le_first(const_label, "0.5")),
        format!(
            "{p}wait_seconds_bucket{} 1\n",
            le_first(const_label, "1000000.0")
        ),
        format!(
            "{p}wait_seconds_bucket{} 2\n",
            le_first(const_label, "+Inf")
        ),
        format!("# HELP {p}size_count Size.\n# TYPE {p}size_count unknown\n"),
        format!("{p}size_count{} 2.0\n", labels("")),
        format!("# HELP {p}size_sum Size.\n# TYPE {p}size_sum unknown\n"),
        format!("{p}size_sum{} 7.0\n", labels("")),
    ]
    .concat()
}

/// The crate prints constant labels, then `le`, then a family's labels.
fn le_first(const_label: &str, le: &str) -> String {
    if const_label.is_empty() {
        format!("{{le=\"{le}\"}}")
    } else {
        format!("{{{const_label},le=\"{le}\"}}")
    }
}

/// `text` with families (each from its `# HELP` line) and the sample lines
/// within each family sorted: the lines the adapter prints are what these
/// tests check; the order of files in the directory's listing (the merge
/// order, covered by the differential tests) decides family and sample order.
fn order_free(text: &str) -> Vec<Vec<&str>> {
    let body = text.strip_suffix("# EOF\n").expect("ends with # EOF");
    let mut families: Vec<Vec<&str>> = Vec::new();
    for line in body.lines() {
        if line.starts_with("# HELP ") || families.is_empty() {
            families.push(Vec::new());
        }
        families.last_mut().unwrap().push(line);
    }
    for family in &mut families {
        let headers = family.iter().take_while(|l| l.starts_with('#')).count();
        family[headers..].sort_unstable();
    }
    families.sort();
    families.push(vec!["# EOF"]);
    families
}

#[test]
fn host_registry_serves_python_workers_next_to_its_own_metrics() {
    let dir = temp_dir();
    run_python("collector_registry_writer.py", &[], &[(ENV, dir.path())]);

    let mut registry = Registry::default();
    let requests: Counter = Counter::default();
    registry.register("host_requests", "Host requests", requests.clone());
    let up: Gauge = Gauge::default();
    registry.register("host_up", "Host up", up.clone());
    registry.register_collector(Box::new(RegistryCollector::new(dir.path())));
    requests.inc_by(2);
    up.set(1);

    let host = "# HELP host_requests Host requests.\n\
                # TYPE host_requests counter\n\
                host_requests_total 2\n\
                # HELP host_up Host up.\n\
                # TYPE host_up gauge\n\
                host_up 1\n";
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert_eq!(
        order_free(&text),
        order_free(&format!("{host}{}# EOF\n", python_families("", "")))
    );

    // Values change between scrapes: the adapter reads the directory anew.
    let mut more = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "13").unwrap(),
    )
    .unwrap();
    more.slot(&encode_key(
        "jobs",
        "jobs_total",
        [("queue", "a\"b\\c\nd")],
        "Jobs \"done\"\nall",
    ))
    .unwrap()
    .add(4.0);
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("jobs_total{queue=\"a\\\"b\\\\c\\nd\"} 7.0\n"),
        "{text}"
    );
}

#[test]
fn sub_registry_prefix_and_labels_apply_to_the_directory() {
    let dir = temp_dir();
    run_python("collector_registry_writer.py", &[], &[(ENV, dir.path())]);
    let mut registry = Registry::default();
    registry
        .sub_registry_with_prefix("py")
        .sub_registry_with_label((Cow::Borrowed("source"), Cow::Borrowed("workers")))
        .register_collector(Box::new(RegistryCollector::new(dir.path())));
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert_eq!(
        order_free(&text),
        order_free(&format!(
            "{}# EOF\n",
            python_families("py_", "source=\"workers\"")
        ))
    );
}

#[test]
fn missing_directory_contributes_nothing_and_does_not_fail_the_host() {
    let dir = temp_dir();
    let mut registry = Registry::default();
    let up: Gauge = Gauge::default();
    registry.register("host_up", "Host up", up.clone());
    registry.register_collector(Box::new(RegistryCollector::new(dir.path().join("gone"))));
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert_eq!(
        text,
        "# HELP host_up Host up.\n# TYPE host_up gauge\nhost_up 0\n# EOF\n"
    );
}
