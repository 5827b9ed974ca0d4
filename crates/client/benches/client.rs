//! multiprom-client updates beside the `prometheus-client` crate's
//! in-process equivalents, in one run. Figures: docs/benchmarks.md.
//!
//! `cargo bench -p multiprom-client`

use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use multiprom_client::{GaugeMode, MultiprocessRegistry, DEFAULT_BUCKETS};
use prometheus_client::metrics::counter::Counter as PcCounter;
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
        labelled_lookup_inc,
        fork_check
    );
}
criterion_main!(group::benches);
