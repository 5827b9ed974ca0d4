//! Which signals `run` passes on to its command.
//!
//! A signal sent with `kill` (a supervisor, systemd, `kill -HUP`) reached
//! only multiprom, so it is passed on. A signal the terminal sent (Ctrl-C,
//! Ctrl-\, a hang-up) went to the terminal's whole foreground process group,
//! which the command shares with multiprom; passing it on would deliver it
//! twice, and servers that take a second SIGINT as "quit now" (gunicorn,
//! uvicorn) would skip their graceful shutdown. The kernel marks the signals
//! it sends itself (`si_code` `SI_KERNEL`), which is how the two are told
//! apart.

use rustix::process::{getpgid, Pid, Signal};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

/// A signal multiprom received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// The signal.
    pub signal: Signal,
    /// The kernel sent it (a terminal's Ctrl-C, Ctrl-\ or hang-up), not a
    /// process.
    pub from_kernel: bool,
}

/// The signals that are passed on.
pub(crate) const PASSED_ON: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

/// Starts receiving [`PASSED_ON`] signals now; each is sent to the returned
/// channel. The receiving thread lives as long as the process (it blocks in
/// the kernel; `run` exits when the command does).
pub(crate) fn receive() -> std::io::Result<tokio::sync::mpsc::UnboundedReceiver<Received>> {
    let mut signals = SignalsInfo::<WithOrigin>::new(PASSED_ON.map(Signal::as_raw))?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for origin in signals.forever() {
                let Some(signal) = Signal::from_named_raw(origin.signal) else {
                    continue;
                };
                let received = Received {
                    signal,
                    from_kernel: origin.cause == Cause::Kernel,
                };
                if tx.send(received).is_err() {
                    break;
                }
            }
        })?;
    Ok(rx)
}

/// Whether `received` should be sent on to `child`: not when the kernel
/// sent it and the child is still in multiprom's process group (so it got
/// it too).
pub(crate) fn should_pass_on(received: Received, child: Pid) -> bool {
    if !received.from_kernel {
        return true;
    }
    let same_group = match (getpgid(Some(child)), getpgid(None)) {
        (Ok(theirs), Ok(ours)) => theirs == ours,
        // Cannot tell: passing it on is the safer mistake (a command that
        // never gets a signal cannot shut down at all).
        _ => false,
    };
    !same_group
}

/// A signal's name, `SIGINT`.
pub(crate) fn name(signal: Signal) -> &'static str {
    match signal {
        Signal::INT => "SIGINT",
        Signal::TERM => "SIGTERM",
        Signal::HUP => "SIGHUP",
        Signal::QUIT => "SIGQUIT",
        _ => "a signal",
    }
}
