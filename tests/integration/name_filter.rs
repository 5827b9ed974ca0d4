//! `GET /metrics?name[]=...`: the samples named, as `prometheus_client`'s
//! restricted registry prints them, byte for byte.

// A test that cannot set itself up should stop right there.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};

use crate::harness::run_python;
use crate::http_client::{get, gunzip};
use crate::serve::{fixture, serve};

const OPENMETRICS_ACCEPT: &str = "application/openmetrics-text; version=1.0.0";

/// What `prometheus_client` serves for `?name[]=NAME...` on `dir`.
fn python_restricted(dir: &Path, format: &str, names: &[&str]) -> String {
    let mut args = vec![dir.to_str().unwrap().to_owned(), format.to_owned()];
    args.extend(names.iter().map(|n| format!("--name={n}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    String::from_utf8(run_python("serve_python_exposition.py", &args, &[])).unwrap()
}

/// The fixture plus a router's favourite, a family with a colon in its name.
fn directory() -> tempfile::TempDir {
    let dir = fixture();
    let name = FileName::new(MetricKind::Gauge(GaugeMode::LiveSum), "4194301").unwrap();
    let mut file = FileWriter::open(dir.path(), &name).unwrap();
    let key = encode_key(
        "vllm:num_requests_waiting",
        "vllm:num_requests_waiting",
        [("model_name", "llama")],
        "Requests waiting.",
    );
    file.slot(&key).unwrap().set(3.0);
    dir
}

#[test]
fn named_samples_are_what_python_prints_for_them() {
    let dir = directory();
    let (_server, addr) = serve(dir.path(), &[]);
    // Counter samples, histogram buckets and counts (not its sums), a
    // summary's sum, gauges in a summing and a most-recent mode, a colon,
    // a repeat and a name no family has.
    let names = [
        "http_requests_total",
        "latency_seconds_bucket",
        "latency_seconds_count",
        "payload_bytes_sum",
        "g_livesum",
        "g_mostrecent",
        "vllm:num_requests_waiting",
        "http_requests_total",
        "no_such_sample",
    ];
    let query: String = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{}name[]={n}", if i == 0 { '?' } else { '&' }))
        .collect();
    for (format, accept) in [("text", None), ("openmetrics", Some(OPENMETRICS_ACCEPT))] {
        let python = python_restricted(dir.path(), format, &names);
        assert!(
            // (OpenMetrics escapes the colon of a sample name, as Python
            // 0.26 does by default.)
            python.contains("# TYPE vllm:num_requests_waiting gauge\n")
                && python.contains("num_requests_waiting{model_name=\"llama\"} 3.0\n")
                && python.contains("latency_seconds_count")
                && !python.contains("latency_seconds_sum")
                && !python.contains("g_livemax"),
            "{format}: the reference is not restricted as expected:\n{python}"
        );
        for gzip in [false, true] {
            let mut headers: Vec<(&str, &str)> =
                accept.map(|a| ("Accept", a)).into_iter().collect();
            if gzip {
                headers.push(("Accept-Encoding", "gzip"));
            }
            let response = get(addr, &format!("/metrics{query}"), &headers);
            assert_eq!(response.status, 200, "{format} gzip={gzip}");
            let body = if gzip {
                assert_eq!(response.header("content-encoding"), Some("gzip"));
                gunzip(&response.body)
            } else {
                response.text()
            };
            assert_eq!(body, python, "{format} gzip={gzip}");
        }
    }
}

#[test]
fn names_are_decoded_as_python_decodes_query_strings() {
    let dir = directory();
    let (_server, addr) = serve(dir.path(), &[]);
    let python = python_restricted(dir.path(), "text", &["vllm:num_requests_waiting", "g_max"]);
    // Percent-encoded brackets and colon, `+` for a space that no name
    // has, an empty value (dropped, as `parse_qs` drops it) and another
    // parameter.
    let response = get(
        addr,
        "/metrics?name%5B%5D=vllm%3Anum_requests_waiting&name[]=&x=1&name[]=g_max&name[]=g+max",
        &[],
    );
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), python);
}

#[test]
fn unknown_names_give_an_empty_answer_and_no_names_everything() {
    let dir = directory();
    let (_server, addr) = serve(dir.path(), &[]);
    let response = get(addr, "/metrics?name[]=nothing_has_this_name", &[]);
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "");
    let response = get(
        addr,
        "/metrics?name[]=nothing_has_this_name",
        &[("Accept", OPENMETRICS_ACCEPT)],
    );
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "# EOF\n");

    // Only empty values: no filter at all, as in prometheus_client.
    let everything = get(addr, "/metrics", &[]).text();
    assert!(everything.contains("# TYPE multiprom_scrape_duration_seconds gauge\n"));
    let unfiltered = get(addr, "/metrics?name[]=", &[]).text();
    let first_family = |text: &str| text.split("# HELP").nth(1).map(str::to_owned);
    assert_eq!(first_family(&unfiltered), first_family(&everything));
    assert!(unfiltered.contains("vllm:num_requests_waiting"));
}

#[test]
fn multiprom_own_families_obey_the_filter() {
    let dir = directory();
    let (_server, addr) = serve(dir.path(), &[]);
    let body = get(
        addr,
        "/metrics?name[]=multiprom_directory_listable&name[]=g_min",
        &[],
    )
    .text();
    let python = python_restricted(dir.path(), "text", &["g_min"]);
    assert_eq!(
        body,
        format!(
            "{python}# HELP multiprom_directory_listable 1 if the last scrape could list the \
             directory, 0 if it could not (then only multiprom's own metrics are served).\n\
             # TYPE multiprom_directory_listable gauge\nmultiprom_directory_listable 1.0\n"
        )
    );
}

#[test]
fn multiprom_process_families_are_served_when_named() {
    let dir = directory();
    let (_server, addr) = serve(dir.path(), &[]);
    let body = get(addr, "/metrics?name[]=process_max_fds", &[]).text();
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 3, "{body}");
    assert_eq!(lines[1], "# TYPE process_max_fds gauge");
    assert!(lines[2].starts_with("process_max_fds "), "{body}");
}
