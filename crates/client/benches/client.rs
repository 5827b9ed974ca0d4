//! multiprom-client updates beside the `prometheus-client` crate's
//! in-process equivalents, in one run. Figures: docs/benchmarks.md.
//!
//! `cargo bench -p multiprom-client`

use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use multiprom_client::{GaugeMode, MultiprocessRegistry, NativeHistogramOptions, DEFAULT_BUCKETS};
use prometheus_client::metrics::counter::Counter as PcCounter;
use prometheus_client::metrics::exemplar::{
    CounterWithExemplar as PcCounterWithExemplar,
    HistogramWithExemplars as PcHistogramWithExemplars,
};
use prometheus_client::metrics::family::Family as PcFamily;
use prometheus_client::metrics::gauge::Gauge as PcGauge;
use prometheus_client::metrics::histogram::Histogram as PcHistogram;

fn registry(dir: &tempfile::TempDir) -> MultiprocessRegistry {
    MultiprocessRegistry::new(dir.path()).expect("registry in a temp dir")
}

fn counter_inc(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ours = registry(&dir)
        .counter("requests_total", "Requests")
        .expect("counter");
    let theirs_u64: PcCounter = PcCounter::default();
    let theirs_f64: PcCounter<f64, AtomicU64> = PcCounter::default();
    let mut g = c.benchmark_group("counter_inc");
    g.bench_function("multiprom_client", |b| b.iter(|| black_box(&ours).inc()));
    g.bench_function("prometheus_client_u64", |b| {
        b.iter(|| black_box(&theirs_u64).inc())
    });
    g.bench_function("prometheus_client_f64", |b| {
        b.iter(|| black_box(&theirs_f64).inc())
    });
    g.finish();
}

/// Both threads run `iters` updates of the same counter at once; the time is
/// per pair of concurrent updates. Shows what the compare-and-swap loop (f64
/// values, as Python's) costs under contention beside `fetch_add`.
fn counter_inc_2_threads(c: &mut Criterion) {
    fn two_threads(iters: u64, inc: impl Fn() + Sync) -> Duration {
        let start = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..iters {
                        inc();
                    }
                });
            }
        });
        start.elapsed()
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let ours = registry(&dir)
        .counter("requests_total", "Requests")
        .expect("counter");
    let theirs_u64: PcCounter = PcCounter::default();
    let theirs_f64: PcCounter<f64, AtomicU64> = PcCounter::default();
    let mut g = c.benchmark_group("counter_inc_2_threads");
    g.bench_function("multiprom_client", |b| {
        b.iter_custom(|iters| two_threads(iters, || black_box(&ours).inc()))
    });
    g.bench_function("prometheus_client_u64", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                black_box(&theirs_u64).inc();
            })
        })
    });
    g.bench_function("prometheus_client_f64", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                black_box(&theirs_f64).inc();
            })
        })
    });
    g.finish();
}

fn gauge_set(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ours = registry(&dir)
        .gauge("temperature", "Temperature", GaugeMode::LiveMax)
        .expect("gauge");
    let ours_recent = registry(&dir)
        .most_recent_gauge("last_seen", "Last seen", GaugeMode::MostRecent)
        .expect("gauge");
    let theirs: PcGauge<f64, AtomicU64> = PcGauge::default();
    let mut g = c.benchmark_group("gauge_set");
    g.bench_function("multiprom_client", |b| {
        b.iter(|| black_box(&ours).set(black_box(21.5)))
    });
    g.bench_function("multiprom_client_mostrecent", |b| {
        b.iter(|| black_box(&ours_recent).set(black_box(21.5)))
    });
    g.bench_function("prometheus_client_f64", |b| {
        b.iter(|| black_box(&theirs).set(black_box(21.5)))
    });
    g.finish();
}

fn histogram_observe(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ours = registry(&dir)
        .histogram("latency_seconds", "Latency", &DEFAULT_BUCKETS)
        .expect("histogram");
    // prometheus-client adds +Inf itself.
    let theirs = PcHistogram::new(DEFAULT_BUCKETS[..14].iter().copied());
    let mut g = c.benchmark_group("histogram_observe");
    g.bench_function("multiprom_client", |b| {
        b.iter(|| black_box(&ours).observe(black_box(0.3)))
    });
    g.bench_function("prometheus_client", |b| {
        b.iter(|| black_box(&theirs).observe(black_box(0.3)))
    });
    g.finish();
}

/// One thread: what recording natively adds to an observation (a bucket
/// lookup, two atomic adds under a shared lock) beside the classic part.
fn native_histogram_observe(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = registry(&dir);
    let classic = registry
        .histogram("classic_seconds", "Latency", &DEFAULT_BUCKETS)
        .expect("histogram");
    let native_only = registry
        .native_histogram(
            "native_seconds",
            "Latency",
            NativeHistogramOptions::default(),
        )
        .expect("native histogram");
    let both = registry
        .native_histogram(
            "both_seconds",
            "Latency",
            NativeHistogramOptions::default().classic_buckets(&DEFAULT_BUCKETS),
        )
        .expect("native histogram with classic buckets");
    let mut g = c.benchmark_group("native_histogram_observe");
    g.bench_function("classic", |b| {
        b.iter(|| black_box(&classic).observe(black_box(0.3)))
    });
    g.bench_function("native_only", |b| {
        b.iter(|| black_box(&native_only).observe(black_box(0.3)))
    });
    g.bench_function("classic_and_native", |b| {
        b.iter(|| black_box(&both).observe(black_box(0.3)))
    });
    g.finish();
}

fn labelled_lookup_inc(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ours = registry(&dir)
        .counter_family("http_requests_total", "Requests", &["method", "code"])
        .expect("family");
    let theirs: PcFamily<[(&'static str, &'static str); 2], PcCounter> = PcFamily::default();
    // Ten children in each, the looked-up one among them.
    for code in [
        "200", "201", "204", "301", "302", "400", "401", "404", "500", "503",
    ] {
        ours.labels(&["GET", code]).expect("child");
        let _ = theirs.get_or_create(&[("method", "GET"), ("code", code)]);
    }
    let mut g = c.benchmark_group("labelled_lookup_inc");
    g.bench_function("multiprom_client", |b| {
        b.iter(|| {
            black_box(&ours)
                .labels(black_box(&["GET", "404"]))
                .expect("child")
                .inc()
        })
    });
    g.bench_function("prometheus_client", |b| {
        b.iter(|| {
            black_box(&theirs)
                .get_or_create(black_box(&[("method", "GET"), ("code", "404")]))
                .inc()
        })
    });
    g.finish();
}

/// An update with an exemplar: the labels are checked, the timestamp read
/// and the record written under its sequence number. prometheus-client
/// keeps its exemplar behind a lock, in memory, and checks nothing.
fn exemplar_updates(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = registry(&dir);
    let counter = registry
        .counter("requests_total", "Requests")
        .expect("counter");
    let histogram = registry
        .histogram("latency_seconds", "Latency", &DEFAULT_BUCKETS)
        .expect("histogram");
    let labels = [("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736")];
    let theirs_counter: PcCounterWithExemplar<Vec<(String, String)>> =
        PcCounterWithExemplar::default();
    let theirs_histogram: PcHistogramWithExemplars<Vec<(String, String)>> =
        PcHistogramWithExemplars::new(DEFAULT_BUCKETS[..14].iter().copied());
    let owned = || vec![(labels[0].0.to_owned(), labels[0].1.to_owned())];
    let mut g = c.benchmark_group("exemplar_updates");
    g.bench_function("multiprom_client_inc_with_exemplar", |b| {
        b.iter(|| {
            black_box(&counter)
                .inc_with_exemplar(1.0, black_box(&labels))
                .expect("valid labels")
        })
    });
    g.bench_function("multiprom_client_observe_with_exemplar", |b| {
        b.iter(|| {
            black_box(&histogram)
                .observe_with_exemplar(black_box(0.3), black_box(&labels))
                .expect("valid labels")
        })
    });
    g.bench_function("prometheus_client_inc_by_with_exemplar", |b| {
        b.iter(|| black_box(&theirs_counter).inc_by(1, Some(owned())))
    });
    g.bench_function("prometheus_client_observe_with_exemplar", |b| {
        b.iter(|| black_box(&theirs_histogram).observe(black_box(0.3), Some(owned())))
    });
    g.finish();
}

/// Why forks are detected with a `pthread_atfork` generation rather than by
/// comparing the pid on every update, as Python does.
fn fork_check(c: &mut Criterion) {
    multiprom_format::fork::watch_forks().expect("pthread_atfork");
    let mut g = c.benchmark_group("fork_check");
    g.bench_function("fork_generation", |b| {
        b.iter(multiprom_format::fork::fork_generation)
    });
    g.bench_function("getpid", |b| b.iter(std::process::id));
    g.finish();
}

// `criterion_group!` defines a public function without documentation.
#[allow(missing_docs)]
mod group {
    use super::*;

    criterion_group!(
        benches,
        counter_inc,
        counter_inc_2_threads,
        gauge_set,
        histogram_observe,
        native_histogram_observe,
        labelled_lookup_inc,
        exemplar_updates,
        fork_check
    );
}
criterion_main!(group::benches);
