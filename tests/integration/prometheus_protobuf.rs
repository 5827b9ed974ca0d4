//! A real Prometheus server with native histograms on asks for the protobuf
//! format first; scraping `multiprom serve` it must get protobuf (the debug
//! log names the format each request got) and store every merged series,
//! names, labels (escapes, non-ASCII) and values, equal to what multiprom
//! serves as text: Prometheus's own protobuf parser is the judge of the
//! encoding. `multiprom scrape --format protobuf` writes the same framing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::{multiprom, scrape_protobuf};
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
