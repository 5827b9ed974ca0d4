//! Unix signals for the long-running commands.

use std::future::Future;

use tokio::signal::unix::{signal, SignalKind};

/// A future that completes with the signal's name on the first SIGINT or
/// SIGTERM. Must be called inside the runtime; the handlers are installed
/// at once, so a signal that arrives before the future is polled still counts.
pub(crate) fn termination() -> std::io::Result<impl Future<Output = &'static str>> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        }
    })
}
