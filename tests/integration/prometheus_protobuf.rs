//! A real Prometheus server with native histograms on asks for the protobuf
//! format first; scraping `multiprom serve` it must get protobuf (the debug
//! log names the format each request got) and store every merged series,
//! names, labels (escapes, non-ASCII) and values, equal to what multiprom
//! serves as text: Prometheus's own protobuf parser is the judge of the
//! encoding. `multiprom scrape --format protobuf` writes the same framing,
//! and the same bytes for the workers' families as the server, which
//! reuses what did not change since its last encoding.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::{multiprom, scrape_protobuf, scrape_protobuf_escaped};
use crate::prometheus_server::{assert_stores_all_served, start_prometheus};
use crate::serve::{fixture, serve};

const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

#[test]
fn prometheus_with_native_histograms_scrapes_protobuf_and_stores_every_series_as_served() {
    let dir = fixture();
    let (server, addr) = serve(dir.path(), &["--log.level", "debug"]);
    // Native histograms make Prometheus 2.x put protobuf first in its
    // Accept header.
    let (prometheus, port, _work) =
        start_prometheus(&addr.to_string(), &["--enable-feature=native-histograms"]);
    assert_stores_all_served(&prometheus, port, addr);
    // Prometheus's requests got protobuf (its scrapes ask for gzip); the
    // checker's own plain requests got text.
    let log = server.stderr();
    let protobuf = format!("answered with {PROTOBUF_CONTENT_TYPE}, gzipped");
    assert!(log.contains(&protobuf), "no {protobuf:?} in:\n{log}");
    assert!(
        log.contains("answered with text/plain; version=0.0.4"),
        "{log}"
    );
}

/// Splits length-delimited messages: each a varint length, then that many
/// bytes; `None` if the bytes do not frame exactly.
fn frames(mut bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let (mut length, mut shift) = (0usize, 0);
        loop {
            let (&byte, rest) = bytes.split_first()?;
            bytes = rest;
            length |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        if length > bytes.len() {
            return None;
        }
        let (frame, rest) = bytes.split_at(length);
        frames.push(frame);
        bytes = rest;
    }
    Some(frames)
}

#[test]
fn scrape_writes_length_delimited_metric_families() {
    let dir = fixture();
    let scraped = scrape_protobuf(dir.path());
    let frames = frames(&scraped).expect("length-delimited messages");
    // One message per family of the text output (the fixture has no sample
    // that needs a message of its own).
    let text = multiprom()
        .args(["scrape", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let families = String::from_utf8(text.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("# TYPE "))
        .count();
    assert_eq!(frames.len(), families);
    // Each starts with field 1 (the name, length-delimited): a counter's
    // with its `_total`, as Prometheus names its series.
    let names: Vec<&[u8]> = frames
        .iter()
        .map(|f| {
            assert_eq!(f[0], 0x0a);
            &f[2..2 + usize::from(f[1])]
        })
        .collect();
    assert!(names.contains(&&b"http_requests_total"[..]), "{names:?}");
    assert!(names.contains(&&b"latency_seconds"[..]), "{names:?}");

    let refused = multiprom()
        .args(["scrape", "--format", "protobuf", "--no-accumulate", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--no-accumulate"));
}

/// A served protobuf body is, change after change, the workers' families
/// as a fresh `multiprom scrape --format protobuf` writes them, then
/// multiprom's own: the server reuses the last encoding of what did not
/// change, and must not reuse anything that did (a value, or a native
/// histogram alone).
#[test]
fn each_served_protobuf_scrape_is_a_fresh_one() {
    use multiprom_format::{
        encode_key, FileName, FileWriter, MetricKind, NativeHistogramConfig, NativeHistogramWriter,
    };

    let dir = crate::harness::temp_dir();
    // Named after this process: live workers, read on every scrape.
    let pid = std::process::id().to_string();
    let mut counters = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, &pid).unwrap(),
    )
    .unwrap();
    let requests = encode_key("requests", "requests_total", [], "Requests.");
    let name = FileName::new(MetricKind::Histogram, &pid).unwrap();
    let mut histograms = FileWriter::open(dir.path(), &name).unwrap();
    let natives = NativeHistogramWriter::open(dir.path(), &name).unwrap();
    let key = |sample: &str, le: &[(&str, &str)]| {
        encode_key("latency_seconds", sample, le.iter().copied(), "Latency.")
    };
    let native = natives
        .series(
            &key("latency_seconds", &[]),
            NativeHistogramConfig::default(),
        )
        .unwrap();
    let mut observe = |value: f64, classic: bool| {
        if classic {
            histograms
                .slot(&key("latency_seconds_sum", &[]))
                .unwrap()
                .add(value);
            histograms
                .slot(&key("latency_seconds_bucket", &[("le", "+Inf")]))
                .unwrap()
                .add(1.0);
        }
        native.observe(value);
    };
    counters.slot(&requests).unwrap().add(1.0);
    observe(0.25, true);

    let (_server, addr) = serve(dir.path(), &[]);
    let accept = [("Accept", PROTOBUF_CONTENT_TYPE)];
    let mut last: Vec<u8> = Vec::new();
    let mut scrape_and_compare = |change: &str, moved: bool| {
        let served = crate::http_client::get(addr, "/metrics", &accept);
        assert_eq!(served.status, 200, "{change}");
        let fresh = scrape_protobuf(dir.path());
        assert!(
            served.body.starts_with(&fresh),
            "{change}: the served workers' families are not a fresh scrape's"
        );
        for own in frames(&served.body[fresh.len()..]).expect("length-delimited messages") {
            let name = &own[2..2 + usize::from(own[1])];
            assert!(
                name.starts_with(b"multiprom_") || name.starts_with(b"process_"),
                "{change}: {}",
                String::from_utf8_lossy(name)
            );
        }
        assert_eq!(fresh != last, moved, "{change}");
        last = fresh;
    };
    scrape_and_compare("first scrape", true);
    scrape_and_compare("nothing changed", false);
    counters.slot(&requests).unwrap().add(2.0);
    scrape_and_compare("a counter moved", true);
    observe(3.0, true);
    scrape_and_compare("a histogram moved", true);
    observe(0.0, false);
    scrape_and_compare("only its native histogram moved", true);
}

/// `serve` answers the protobuf range's `escaping` (Prometheus 3.0 names
/// `allow-utf-8` there, 3.5 none) with the workers' families as `multiprom
/// scrape --format protobuf --escaping` writes them, the scheme named in
/// the `Content-Type` only when asked; scrapes that alternate between the
/// two never get the other's names (the encoding cache is per scheme).
#[test]
fn served_protobuf_names_are_escaped_as_the_range_asks() {
    use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

    let dir = crate::harness::temp_dir();
    let mut counters = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "1").unwrap(),
    )
    .unwrap();
    counters
        .slot(&encode_key(
            "caf\u{e9}.orders",
            "caf\u{e9}.orders_total",
            [("r\u{e9}gion", "eu")],
            "Orders.",
        ))
        .unwrap()
        .add(3.0);
    drop(counters);
    let (_server, addr) = serve(dir.path(), &[]);
    let scraped = |escaping| scrape_protobuf_escaped(dir.path(), escaping);
    let v3_0 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,*/*;q=0.1";
    let v3_5 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,*/*;q=0.1";
    let (utf8, underscores) = (scraped("allow-utf-8"), scraped("underscores"));
    assert_ne!(utf8, underscores);
    for _ in 0..2 {
        for (accept, content_type, workers) in [
            (
                v3_0,
                format!("{PROTOBUF_CONTENT_TYPE}; escaping=allow-utf-8"),
                &utf8,
            ),
            (v3_5, PROTOBUF_CONTENT_TYPE.to_owned(), &underscores),
        ] {
            let response = crate::http_client::get(addr, "/metrics", &[("Accept", accept)]);
            assert_eq!(response.status, 200);
            assert_eq!(response.header("content-type"), Some(content_type.as_str()));
            assert!(
                response.body.starts_with(workers),
                "{accept}: not the workers' families as scraped"
            );
        }
    }
}
