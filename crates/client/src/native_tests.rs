//! Native histograms against the files they write: the native file read
//! back by the format's reader, the classic part beside a classic
//! histogram's, threads, and a native file that cannot be made (fork:
//! `tests/native_fork.rs`, which needs a single-threaded process).

use std::collections::BTreeMap;
use std::path::Path;

use multiprom_format::native_buckets::{bucket_index, DEFAULT_ZERO_THRESHOLD};
use multiprom_format::native_file::native_histogram_path;
use multiprom_format::{read_file, read_native_histogram_file, FileName, NativeHistogramEntry};

use crate::*;

fn registry(dir: &Path) -> MultiprocessRegistry {
    MultiprocessRegistry::new(dir).unwrap()
}

fn db_name(pid: u32) -> FileName {
    format!("histogram_{pid}.db").parse().unwrap()
}

fn natives(dir: &Path, pid: u32) -> Vec<NativeHistogramEntry> {
    read_native_histogram_file(&native_histogram_path(dir, &db_name(pid)))
        .unwrap()
        .entries
}

fn classic(dir: &Path, pid: u32) -> Vec<(String, f64)> {
    read_file(&dir.join(db_name(pid).to_string()))
        .unwrap()
        .entries
        .into_iter()
        .map(|e| (e.raw_key, e.value))
        .collect()
}

/// The native histogram of `values` at `schema`, worked out value by value.
fn expected(values: &[f64], schema: i8) -> multiprom_format::NativeHistogram {
    let mut h = multiprom_format::NativeHistogram::empty(schema, DEFAULT_ZERO_THRESHOLD);
    let (mut positive, mut negative) = (BTreeMap::new(), BTreeMap::new());
    for &v in values {
        h.sum += v;
        if v.abs() <= DEFAULT_ZERO_THRESHOLD {
            h.zero_count += 1;
        } else if v > 0.0 {
            *positive.entry(bucket_index(v, schema)).or_insert(0) += 1;
        } else {
            *negative.entry(bucket_index(-v, schema)).or_insert(0) += 1;
        }
    }
    h.positive = positive.into_iter().collect();
    h.negative = negative.into_iter().collect();
    h
}

#[test]
fn observations_are_read_back_natively_per_child() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let options = NativeHistogramOptions::default().schema(2);
    let family = r
        .native_histogram_family("lat", "Latency.", options, &["route"])
        .unwrap();
    let a = family.labels(&["/a"]).unwrap();
    let b = family.labels(&["/b"]).unwrap();
    let a_values = [0.002, 0.5, 0.51, 1.0, 1.0, 3.7, 0.0, -2.0, 250.0];
    for v in a_values {
        a.observe(v);
    }
    b.observe(7.0);
    let got = natives(dir.path(), std::process::id());
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0].raw_key,
        r#"["lat", "lat", {"route": "/a"}, "Latency."]"#
    );
    assert_eq!(got[0].histogram, expected(&a_values, 2));
    assert_eq!(got[0].histogram.count(), 9);
    assert_eq!(
        got[1].raw_key,
        r#"["lat", "lat", {"route": "/b"}, "Latency."]"#
    );
    assert_eq!(got[1].histogram, expected(&[7.0], 2));
    assert_eq!(a.native(), Some(expected(&a_values, 2)));
    // A timer observes once, into both parts.
    b.start_timer().observe_duration();
    assert_eq!(b.native().unwrap().count(), 2);
    assert_eq!(b.count(), 2.0);
}

#[test]
fn the_classic_part_is_what_a_classic_histogram_writes() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let bounds = [0.1, 1.0, 10.0];
    let old = r.histogram("lat", "L", &bounds).unwrap();
    let options = NativeHistogramOptions::default().classic_buckets(&bounds);
    let new = r.native_histogram("lat_native", "L", options).unwrap();
    let only = r
        .native_histogram("lat_only", "L", NativeHistogramOptions::default())
        .unwrap();
    for v in [0.05, 0.1, 0.5, 2.0, 20.0, f64::INFINITY, -1.0] {
        old.observe(v);
        new.observe(v);
        only.observe(v);
    }
    old.observe_with_exemplar(3.0, &[("trace_id", "t")])
        .unwrap();
    new.observe_with_exemplar(3.0, &[("trace_id", "t")])
        .unwrap();
    only.observe_with_exemplar(3.0, &[("trace_id", "t")])
        .unwrap();
    let entries = classic(dir.path(), std::process::id());
    let of = |name: &str| -> Vec<(String, f64)> {
        let prefix = format!(r#"["{name}", "#);
        entries
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .cloned()
            .collect()
    };
    let classic_lat = of("lat");
    assert_eq!(classic_lat.len(), 5, "{classic_lat:?}");
    let renamed: Vec<(String, f64)> = of("lat_native")
        .into_iter()
        .map(|(k, v)| (k.replace("lat_native", "lat"), v))
        .collect();
    assert_eq!(renamed, classic_lat);
    // Native only: the sum, and every observation in the one +Inf bucket.
    assert_eq!(
        of("lat_only"),
        [
            (
                r#"["lat_only", "lat_only_sum", {}, "L"]"#.to_string(),
                f64::INFINITY
            ),
            (
                r#"["lat_only", "lat_only_bucket", {"le": "+Inf"}, "L"]"#.to_string(),
                8.0
            ),
        ]
    );
    assert_eq!(new.bucket_counts(), old.bucket_counts());
    assert_eq!(only.native().unwrap().count(), 8);
}

#[test]
fn definitions_are_checked_like_histograms() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let default = NativeHistogramOptions::default;
    let refused = |result: Result<Family<NativeHistogram>, ClientError>| result.unwrap_err();
    let e = refused(r.native_histogram_family("h", "", default(), &["le"]));
    assert!(matches!(e, ClientError::ReservedLabelName { .. }), "{e}");
    let e = r.native_histogram("1h", "", default()).unwrap_err();
    assert!(matches!(e, ClientError::InvalidMetricName { .. }), "{e}");
    let e = refused(r.native_histogram_family("h", "", default(), &[]));
    assert!(matches!(e, ClientError::NoLabelNames { .. }), "{e}");
    for (options, reason) in [
        (default().schema(9), NativeOptionsError::Schema),
        (default().schema(-5), NativeOptionsError::Schema),
        (default().max_buckets(0), NativeOptionsError::MaxBuckets),
        (
            default().max_buckets(70_000),
            NativeOptionsError::MaxBuckets,
        ),
        (
            default().zero_threshold(-1.0),
            NativeOptionsError::ZeroThreshold,
        ),
        (
            default().zero_threshold(f64::NAN),
            NativeOptionsError::ZeroThreshold,
        ),
    ] {
        let e = r.native_histogram("h", "", options).unwrap_err();
        assert!(
            matches!(&e, ClientError::InvalidNativeOptions { reason: got, .. } if *got == reason),
            "{e}"
        );
    }
    let e = r
        .native_histogram("h", "", default().classic_buckets(&[]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::InvalidBuckets {
                reason: BucketsError::TooFew,
                ..
            }
        ),
        "{e}"
    );
    // Registering again: the same options give the same metric; others,
    // or a classic histogram of that name, conflict.
    let h = r.native_histogram("h", "", default()).unwrap();
    r.native_histogram("h", "", default()).unwrap().observe(1.0);
    assert_eq!(h.count(), 1.0);
    let e = r
        .native_histogram("h", "", default().schema(4))
        .unwrap_err();
    assert!(matches!(e, ClientError::Conflict { .. }), "{e}");
    let e = r.histogram("h", "", &[f64::INFINITY, 1.0]).unwrap_err();
    assert!(matches!(e, ClientError::InvalidBuckets { .. }), "{e}");
    let e = r.histogram("h", "", &DEFAULT_BUCKETS).unwrap_err();
    assert!(matches!(e, ClientError::Conflict { .. }), "{e}");
    let e = r.counter("h_bucket", "").unwrap_err();
    assert!(matches!(e, ClientError::NameClash { .. }), "{e}");
}

#[test]
fn threads_lose_no_observation() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let options = NativeHistogramOptions::default()
        .max_buckets(20)
        .classic_buckets(&[1.0]);
    let h = r.native_histogram("h", "", options).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let h = h.clone();
            s.spawn(move || {
                for n in 0..5000 {
                    h.observe(f64::from(n % 97 + t) * 0.013 + 0.001);
                }
            });
        }
    });
    let native = &natives(dir.path(), std::process::id())[0].histogram;
    assert_eq!(native.count(), 20_000);
    assert!(native.bucket_count() <= 20, "{native:?}");
    assert_eq!(h.count(), 20_000.0);
}

#[test]
fn a_native_file_that_cannot_be_made_refuses_the_metric() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    r.histogram("classic", "", &DEFAULT_BUCKETS).unwrap();
    // A file where the native histogram directory should be.
    std::fs::write(dir.path().join("native-histograms"), b"").unwrap();
    let e = r
        .native_histogram("h", "", NativeHistogramOptions::default())
        .unwrap_err();
    assert!(matches!(e, ClientError::Write(_)), "{e}");
    let keys: Vec<String> = classic(dir.path(), std::process::id())
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(
        keys.iter().all(|k| !k.contains("h_")),
        "no entry left: {keys:?}"
    );
    // The name is free again once the file can be made.
    std::fs::remove_file(dir.path().join("native-histograms")).unwrap();
    r.native_histogram("h", "", NativeHistogramOptions::default())
        .unwrap()
        .observe(1.0);
}
