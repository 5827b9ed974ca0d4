//! [`PushStats`]: what a pusher has done, as multiprom's own metrics and a
//! line of the status page.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use multiprom_collector::{FamilyType, LabelSet, MergedFamily, MergedSample};

/// Counters of one pusher, shared with whoever reports them.
#[derive(Debug, Default)]
pub struct PushStats {
    pushes: AtomicU64,
    failures: AtomicU64,
    bytes: AtomicU64,
    /// Unix seconds of the last accepted push, as `f64` bits (0: none yet).
    last_success: AtomicU64,
    /// Why the last push failed, while it is failing.
    failing: Mutex<Option<String>>,
}

impl PushStats {
    pub(crate) fn sent(&self, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn succeeded(&self, at: SystemTime) {
        self.pushes.fetch_add(1, Ordering::Relaxed);
        let seconds = at
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.last_success
            .store(seconds.to_bits(), Ordering::Relaxed);
        *self.lock_failing() = None;
    }

    pub(crate) fn failed(&self, why: &str) {
        self.pushes.fetch_add(1, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.lock_failing() = Some(why.to_owned());
    }

    fn lock_failing(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.failing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Pushes made (each request sent, retries included).
    #[must_use]
    pub fn pushes(&self) -> u64 {
        self.pushes.load(Ordering::Relaxed)
    }

    /// Pushes that failed.
    #[must_use]
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Body bytes sent, as sent (compressed).
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// When a push was last accepted, if one was.
    #[must_use]
    pub fn last_success(&self) -> Option<f64> {
        let seconds = f64::from_bits(self.last_success.load(Ordering::Relaxed));
        (seconds > 0.0).then_some(seconds)
    }

    /// Why pushing fails now, if it does.
    #[must_use]
    pub fn failing(&self) -> Option<String> {
        self.lock_failing().clone()
    }
}

/// One pusher's name (its protocol and receiver) and counters.
#[derive(Debug, Clone)]
pub struct PusherReport {
    /// `otlp` or `remote_write`.
    pub protocol: &'static str,
    /// Where it pushes (without credentials).
    pub receiver: String,
    /// Its counters.
    pub stats: Arc<PushStats>,
}

/// multiprom's own metrics of `pushers`, labelled by protocol and receiver.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::Format;
/// use multiprom_push::{push_families, PushStats, PusherReport};
/// let report = PusherReport { protocol: "otlp", receiver: "http://otel:4318/v1/metrics".into(), stats: Arc::new(PushStats::default()) };
/// let mut text = String::new();
/// Format::Prometheus.encode(&push_families(&[report]), &mut text);
/// assert!(text.contains("multiprom_pushes_total{protocol=\"otlp\",receiver=\"http://otel:4318/v1/metrics\"} 0.0\n"));
/// ```
#[must_use]
pub fn push_families(pushers: &[PusherReport]) -> Vec<MergedFamily> {
    if pushers.is_empty() {
        return Vec::new();
    }
    let labels = |p: &PusherReport| -> LabelSet {
        Arc::new([
            ("protocol".into(), p.protocol.into()),
            ("receiver".into(), p.receiver.as_str().into()),
        ])
    };
    let family =
        |name: &str, suffix: &str, kind, help: &str, value: &dyn Fn(&PushStats) -> Option<f64>| {
            MergedFamily {
                name: name.into(),
                help: help.into(),
                family_type: kind,
                gauge_mode: None,
                samples: pushers
                    .iter()
                    .filter_map(|p| {
                        Some(MergedSample {
                            name: format!("{name}{suffix}").into(),
                            labels: labels(p),
                            value: value(&p.stats)?,
                            exemplar: None,
                        })
                    })
                    .collect(),
            }
        };
    #[allow(clippy::cast_precision_loss)] // counts far below 2^53
    let families = vec![
        family(
            "multiprom_pushes",
            "_total",
            FamilyType::Counter,
            "Requests each pusher sent (retries included).",
            &|s| Some(s.pushes() as f64),
        ),
        family(
            "multiprom_push_failures",
            "_total",
            FamilyType::Counter,
            "Requests that failed (not accepted, or no answer).",
            &|s| Some(s.failures() as f64),
        ),
        family(
            "multiprom_push_sent_bytes",
            "_total",
            FamilyType::Counter,
            "Request body bytes sent, compressed.",
            &|s| Some(s.bytes() as f64),
        ),
        family(
            "multiprom_push_last_success_timestamp_seconds",
            "",
            FamilyType::Gauge,
            "When each pusher's last push was accepted (absent before the first).",
            &PushStats::last_success,
        ),
    ];
    families
}
