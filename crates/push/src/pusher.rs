//! [`Pusher`]: pushes a served view to one receiver on a schedule, and
//! once more when told to stop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use multiprom_collector::{Exemplars, Natives, ServedView};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::config::{PushConfig, PushSetupError};
use crate::encoder::Encoder;
use crate::sender::{Outcome, Sender};
use crate::stats::{PushStats, PusherReport};

/// How long the last push (when told to stop) may take, retries included:
/// within the usual grace a supervisor gives before SIGKILL (Kubernetes: 30 s).
pub const LAST_PUSH_WAIT: Duration = Duration::from_secs(10);

/// Pushes one directory's served view to one receiver.
///
/// Every push sends the view as it is now, so a push that fails needs no
/// queue: the next carries every cumulative total (and, with delta
/// temporality, the change since the last push the receiver accepted).
/// Memory stays one body, however long the receiver is down. A failing
/// receiver is logged once per change of what fails, and once when it
/// recovers.
#[derive(Debug)]
pub struct Pusher {
    view: Arc<ServedView>,
    config: PushConfig,
    sender: Sender,
    /// The encoder (away on the blocking pool while a body is made).
    encoder: Option<Encoder>,
    stats: Arc<PushStats>,
    /// What failed last, while failing (for logging changes once).
    failing: Option<String>,
    /// Attempts that failed since the last accepted push.
    failed_attempts: u64,
}

impl Pusher {
    /// A pusher of `view` as `config` says. Touches nothing on disk (the
    /// credentials files are read on each push; see
    /// [`Credentials::check`](crate::Credentials::check) to read them at
    /// start).
    pub fn new(view: Arc<ServedView>, config: PushConfig) -> Result<Pusher, PushSetupError> {
        let sender = Sender::new(&config)?;
        let encoder = Some(Encoder::new(&config.protocol));
        Ok(Pusher {
            view,
            config,
            sender,
            encoder,
            stats: Arc::default(),
            failing: None,
            failed_attempts: 0,
        })
    }

    /// Its name and counters, for the self-metrics and the status page.
    #[must_use]
    pub fn report(&self) -> PusherReport {
        PusherReport {
            protocol: self.config.protocol.name(),
            receiver: self.config.receiver(),
            stats: Arc::clone(&self.stats),
        }
    }

    /// Pushes every interval until `stop` completes, then once more (so
    /// the last totals arrive), for at most [`LAST_PUSH_WAIT`].
    pub async fn run(mut self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let interval = self.config.interval;
        let mut due = Instant::now() + interval;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = &mut stop => break,
            }
            // Retries end when the next push is due: it sends newer data.
            let next = due + interval;
            tokio::select! {
                _ = self.push(next) => {}
                () = &mut stop => break,
            }
            due = next.max(Instant::now());
        }
        self.push(Instant::now() + LAST_PUSH_WAIT).await;
    }

    /// Collects the view and pushes it, retrying until `deadline`; whether
    /// the receiver accepted it.
    pub async fn push(&mut self, deadline: Instant) -> bool {
        let view = Arc::clone(&self.view);
        let protocol = self.config.protocol.clone();
        let mut encoder = self
            .encoder
            .take()
            .unwrap_or_else(|| Encoder::new(&protocol));
        let made = tokio::task::spawn_blocking(move || {
            let body = view
                .collect_all(Natives::Merge, Exemplars::Attach)
                .map(|served| encoder.body(&served));
            (body, encoder)
        })
        .await;
        let body = match made {
            Ok((Ok(body), encoder)) => {
                self.encoder = Some(encoder);
                body
            }
            Ok((Err(e), encoder)) => {
                self.encoder = Some(encoder);
                self.failed(
                    &format!("cannot collect: {e}"),
                    "tried again at the next push",
                );
                return false;
            }
            // The encoder is lost with the panic: the next push makes one.
            Err(e) => {
                self.failed(
                    &format!("collection panicked: {e}"),
                    "tried again at the next push",
                );
                return false;
            }
        };
        let mut backoff = Backoff::new();
        loop {
            self.stats.sent(body.len());
            match self.sender.send(body.clone()).await {
                Outcome::Accepted {
                    body: answer,
                    written,
                } => {
                    let checked = self
                        .encoder
                        .as_ref()
                        .map_or(Ok(()), |e| e.check_written(written));
                    if let Err(why) = checked {
                        self.failed(&format!("refused: {why}"), "sent again at the next push");
                        self.refused();
                        return false;
                    }
                    if let Some(encoder) = &mut self.encoder {
                        encoder.accepted(&answer);
                    }
                    self.succeeded();
                    return true;
                }
                Outcome::Refused(why) => {
                    self.failed(&format!("refused: {why}"), "sent again at the next push");
                    self.refused();
                    return false;
                }
                Outcome::Retry { why, after } => {
                    self.failed(&why, "retrying; the next push carries every total");
                    let wait = backoff.next(after);
                    if Instant::now() + wait >= deadline {
                        self.refused();
                        return false;
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// The body never arrived: a delta encoder goes back to the values the
    /// receiver has.
    fn refused(&mut self) {
        if let Some(encoder) = &mut self.encoder {
            encoder.refused();
        }
    }

    fn succeeded(&mut self) {
        self.stats.succeeded(std::time::SystemTime::now());
        if self.failing.take().is_some() {
            tracing::info!(
                "push to {} accepted again, after {} failed attempts",
                self.config.receiver(),
                self.failed_attempts
            );
        }
        self.failed_attempts = 0;
    }

    fn failed(&mut self, why: &str, next: &str) {
        self.stats.failed(why);
        self.failed_attempts += 1;
        // Logged when what fails changes, not on every attempt. A status
        // line's text may carry details that change (an id): the kind is
        // its first words.
        let kind: String = why.split(':').next().unwrap_or(why).to_owned();
        if self.failing.as_deref() != Some(kind.as_str()) {
            tracing::warn!("push to {} failing: {why} ({next})", self.config.receiver());
            self.failing = Some(kind);
        }
    }
}
