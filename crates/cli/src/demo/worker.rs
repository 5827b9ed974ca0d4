//! One demo worker: a process that behaves like an LLM inference server's
//! worker and records what such servers record, through `multiprom-client`.
//!
//! Requests arrive at random, wait in a queue, run (first token, then the
//! rest), and finish ok or (rarely) with an error. Timing is simulated with
//! a tiny deterministic PRNG seeded from the pid: no real model, no network.

use std::time::{Duration, Instant};

use multiprom_client::{ClientError, GaugeMode, MultiprocessRegistry, NativeHistogramOptions};

use crate::exit_code::ExitCode;

/// Models served, one per worker in turn, so label sets vary.
const MODELS: [&str; 2] = ["llama-3.1-8b-instruct", "qwen2.5-7b-instruct"];
/// Requests one worker runs at once (its "batch").
const MAX_RUNNING: usize = 4;
/// Time-to-first-token buckets, as vLLM uses (seconds).
const TTFT_BUCKETS: [f64; 11] = [0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];
/// End-to-end latency buckets (seconds).
const E2E_BUCKETS: [f64; 10] = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];
/// Simulation step.
const TICK: Duration = Duration::from_millis(20);

/// xorshift64*: enough randomness for a demo, no dependency.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An exponentially distributed duration with the given mean.
    fn exp_secs(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }
}

struct Request {
    arrived: Instant,
    started: Instant,
    first_token_after: f64,
    total_after: f64,
    first_token_seen: bool,
    tokens: f64,
}

/// Runs worker `index` until killed. Exit code 1 if the metrics directory
/// cannot be used.
pub(crate) fn main(index: u32) -> ExitCode {
    match simulate(index) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("multiprom demo worker {index}: {err}");
            ExitCode::from(1)
        }
    }
}

fn simulate(index: u32) -> Result<(), ClientError> {
    // Die with the demo: a killed parent must not leave workers behind.
    let parent = rustix::process::getppid();
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM));
    let registry = MultiprocessRegistry::from_env()?;
    let model = MODELS[index as usize % MODELS.len()];
    let requests = registry.counter_family(
        "demo_requests",
        "Requests finished, by status.",
        &["model", "status"],
    )?;
    let ok = requests.labels(&[model, "ok"])?;
    let failed = requests.labels(&[model, "error"])?;
    let tokens = registry
        .counter_family("demo_generation_tokens", "Tokens generated.", &["model"])?
        .labels(&[model])?;
    // Native as well as classic, as an inference server's latency
    // histograms would be with native histograms turned on: text scrapes
    // see the classic buckets, a Prometheus with native histograms the
    // merged native one.
    let ttft = registry
        .native_histogram_family(
            "demo_time_to_first_token_seconds",
            "Time from arrival to the first generated token.",
            NativeHistogramOptions::default().classic_buckets(&TTFT_BUCKETS),
            &["model"],
        )?
        .labels(&[model])?;
    let e2e = registry
        .histogram_family(
            "demo_e2e_request_latency_seconds",
            "Time from arrival to the last generated token.",
            &E2E_BUCKETS,
            &["model"],
        )?
        .labels(&[model])?;
    let running = registry
        .gauge_family(
            "demo_requests_running",
            "Requests being generated, summed over live workers.",
            GaugeMode::LiveSum,
            &["model"],
        )?
        .labels(&[model])?;
    let waiting = registry
        .gauge_family(
            "demo_requests_waiting",
            "Requests queued, summed over live workers.",
            GaugeMode::LiveSum,
            &["model"],
        )?
        .labels(&[model])?;
    let kv_cache = registry
        .gauge_family(
            "demo_kv_cache_usage_ratio",
            "KV-cache usage (0 to 1), the highest of the live workers.",
            GaugeMode::LiveMax,
            &["model"],
        )?
        .labels(&[model])?;
    let last_request = registry.most_recent_gauge(
        "demo_last_request_timestamp_seconds",
        "Unix time of the most recently finished request, over all workers.",
        GaugeMode::MostRecent,
    )?;
    let started = registry.gauge(
        "demo_worker_start_time_seconds",
        "Unix time each live worker started (one series per pid).",
        GaugeMode::LiveAll,
    )?;
    started.set_to_current_time();

    let mut rng = Rng(u64::from(std::process::id()).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut queue: Vec<Instant> = Vec::new();
    let mut active: Vec<Request> = Vec::new();
    loop {
        let now = Instant::now();
        // About 3 arrivals a second per worker, in bursts.
        if rng.next_f64() < 0.06 {
            queue.push(now);
        }
        while active.len() < MAX_RUNNING && !queue.is_empty() {
            let arrived = queue.remove(0);
            let first_token_after = 0.015 + rng.exp_secs(0.06);
            active.push(Request {
                arrived,
                started: now,
                first_token_after,
                total_after: first_token_after + rng.exp_secs(1.2),
                first_token_seen: false,
                tokens: (50.0 + rng.exp_secs(250.0)).round(),
            });
        }
        let mut i = 0;
        while i < active.len() {
            let request = &mut active[i];
            let elapsed = now.duration_since(request.started).as_secs_f64();
            if !request.first_token_seen && elapsed >= request.first_token_after {
                request.first_token_seen = true;
                ttft.observe(now.duration_since(request.arrived).as_secs_f64());
            }
            if elapsed >= request.total_after {
                let request = active.swap_remove(i);
                e2e.observe(now.duration_since(request.arrived).as_secs_f64());
                if rng.next_f64() < 0.03 {
                    failed.inc();
                } else {
                    ok.inc();
                    tokens.inc_by(request.tokens)?;
                }
                last_request.set_to_current_time();
            } else {
                i += 1;
            }
        }
        running.set(active.len() as f64);
        waiting.set(queue.len() as f64);
        // A fold from +0.0: `Sum` for f64 starts at -0.0, which would print.
        let kv_tokens = active.iter().fold(0.0, |sum, r| sum + r.tokens);
        kv_cache.set((kv_tokens / 2048.0 * (0.9 + 0.1 * rng.next_f64())).min(1.0));
        std::thread::sleep(TICK);
        if rustix::process::getppid() != parent {
            return Ok(());
        }
    }
}
