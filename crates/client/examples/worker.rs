//! A worker process writing metrics that Python's `MultiProcessCollector` and
//! multiprom read as their own.
//!
//! ```sh
//! mkdir -p /tmp/metrics
//! PROMETHEUS_MULTIPROC_DIR=/tmp/metrics cargo run -p multiprom-client --example worker -- 200
//! cargo run -- scrape --dir /tmp/metrics     # or Python's MultiProcessCollector
//! ```
//!
//! Run it several times, or several at once: each process writes its own
//! files and the collector adds them up.

use std::time::Duration;

use multiprom_client::{ClientError, GaugeMode, MultiprocessRegistry, DEFAULT_BUCKETS};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = match MultiprocessRegistry::from_env() {
        Ok(registry) => registry,
        Err(err @ ClientError::NoDirectory(_)) => {
            eprintln!("{err}");
            std::process::exit(2);
        }
        Err(err) => return Err(err.into()),
    };
    let requests: u32 = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 100,
    };

    let by_status = registry.counter_family("requests_total", "Requests served", &["status"])?;
    // Look a child up once and keep the handle: updates are then one atomic op.
    let ok = by_status.labels(&["200"])?;
    let latency = registry.histogram(
        "request_latency_seconds",
        "Time to serve a request",
        &DEFAULT_BUCKETS,
    )?;
    let running = registry.gauge(
        "requests_running",
        "Requests being served",
        GaugeMode::LiveSum,
    )?;
    let last_request = registry.most_recent_gauge(
        "last_request_timestamp_seconds",
        "When the last request finished",
        GaugeMode::MostRecent,
    )?;

    for i in 0..requests {
        let _in_flight = running.track_inprogress();
        let _timer = latency.start_timer();
        std::thread::sleep(Duration::from_millis(1 + u64::from(i % 7)));
        if i % 10 == 9 {
            by_status.labels(&["500"])?.inc();
        } else {
            ok.inc();
        }
        last_request.set_to_current_time();
    }
    println!(
        "process {} served {requests} requests; metrics in {}",
        registry.process_id(),
        registry.dir().display()
    );
    Ok(())
}
