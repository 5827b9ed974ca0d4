//! The pusher's OTLP bodies, written with each series' attributes encoded
//! once, are the requests of a fresh encoding, push after push, while the
//! directory changes: cumulative and delta.

use multiprom_collector::{DirCollector, Exemplars, Natives, ServedView};
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
use multiprom_push::otlp::{AttributeCache, ExportMetricsServiceRequest, OtlpEncoder, Temporality};
use prost::Message;

use crate::remote_write::{directory, latency};

#[test]
fn a_cached_body_is_the_fresh_request() {
    for temporality in [Temporality::Cumulative, Temporality::Delta] {
        let dir = tempfile::tempdir().unwrap();
        directory(dir.path());
        let view = ServedView::new(DirCollector::new(dir.path()));
        let resource = vec![("service.name".to_owned(), "web".to_owned())];
        let mut fresh = OtlpEncoder::new(resource.clone(), temporality);
        let mut cached = OtlpEncoder::new(resource, temporality);
        let mut cache = AttributeCache::default();
        let mut requests = Vec::new();
        for round in 0..4 {
            match round {
                1 => latency(dir.path(), "3", "/a", &[0.75], true),
                2 => {
                    let requests =
                        encode_key("requests", "requests_total", [("code", "500")], "Requests.");
                    let name = FileName::new(MetricKind::Counter, "3").unwrap();
                    FileWriter::open(dir.path(), &name)
                        .unwrap()
                        .slot(&requests)
                        .unwrap()
                        .add(1.0);
                }
                _ => {}
            }
            let served = view.collect_all(Natives::Merge, Exemplars::Attach).unwrap();
            let want = fresh.request(&served).encode_to_vec();
            let body = cached.encode_cached(&served, &mut cache);
            // The same request, its fields in prost's order once decoded.
            let got = ExportMetricsServiceRequest::decode(body.as_slice())
                .unwrap()
                .encode_to_vec();
            assert_eq!(got, want, "{temporality:?}, round {round}");
            requests.push(want);
        }
        assert_ne!(requests[1], requests[2], "{temporality:?}");
    }
}
