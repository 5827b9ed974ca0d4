//! Which signals `run` passes on to its command.
//!
//! Those that stop or steer a server: SIGINT, SIGTERM, SIGHUP, SIGQUIT, and
//! the ones gunicorn takes for its own controls (SIGUSR1 reopens the logs,
//! SIGUSR2 re-executes, SIGWINCH, SIGTTIN and SIGTTOU change the workers).
//! Without a handler the last five would end multiprom (SIGUSR1, SIGUSR2),
//! stop it (SIGTTIN, SIGTTOU) or be lost (SIGWINCH), with the command
//! running on behind an endpoint that no longer answers.
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
pub(crate) const PASSED_ON: [Signal; 9] = [
    Signal::INT,
    Signal::TERM,
    Signal::HUP,
    Signal::QUIT,
    Signal::USR1,
    Signal::USR2,
    Signal::WINCH,
    Signal::TTIN,
    Signal::TTOU,
];

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

/// What to do with a signal multiprom received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Send it to the command.
    PassOn,
    /// Nothing: the command got it too, from the terminal.
    AlreadyThere,
    /// Stop multiprom, as the signal's default action would have: the
    /// kernel's SIGTTIN or SIGTTOU for a background job that used the
    /// terminal. (Caught, the terminal read or write that caused it would
    /// be retried at once, and cause it again, without end.)
    StopSelf,
}

/// What to do with `received`, the command being `child`: pass it on,
/// unless the kernel sent it and the child is still in multiprom's process
/// group (so it got it too); the kernel's job control signals stop
/// multiprom itself.
pub(crate) fn action(received: Received, child: Pid) -> Action {
    if !received.from_kernel {
        return Action::PassOn;
    }
    if matches!(received.signal, Signal::TTIN | Signal::TTOU) {
        return Action::StopSelf;
    }
    let same_group = match (getpgid(Some(child)), getpgid(None)) {
        (Ok(theirs), Ok(ours)) => theirs == ours,
        // Cannot tell: passing it on is the safer mistake (a command that
        // never gets a signal cannot shut down at all).
        _ => false,
    };
    if same_group {
        Action::AlreadyThere
    } else {
        Action::PassOn
    }
}

/// A signal's name, `SIGINT`.
pub(crate) fn name(signal: Signal) -> &'static str {
    match signal {
        Signal::INT => "SIGINT",
        Signal::TERM => "SIGTERM",
        Signal::HUP => "SIGHUP",
        Signal::QUIT => "SIGQUIT",
        Signal::USR1 => "SIGUSR1",
        Signal::USR2 => "SIGUSR2",
        Signal::WINCH => "SIGWINCH",
        Signal::TTIN => "SIGTTIN",
        Signal::TTOU => "SIGTTOU",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_done_with_each_signal() {
        let sent = |signal| Received {
            signal,
            from_kernel: false,
        };
        let from_terminal = |signal| Received {
            signal,
            from_kernel: true,
        };
        // A child in multiprom's own process group: this process stands in.
        let same_group = rustix::process::getpid();
        for signal in PASSED_ON {
            assert_eq!(action(sent(signal), same_group), Action::PassOn);
        }
        for signal in [Signal::INT, Signal::QUIT, Signal::HUP, Signal::WINCH] {
            assert_eq!(
                action(from_terminal(signal), same_group),
                Action::AlreadyThere
            );
        }
        for signal in [Signal::TTIN, Signal::TTOU] {
            assert_eq!(action(from_terminal(signal), same_group), Action::StopSelf);
        }
        // A command that left multiprom's group did not get the terminal's.
        use std::os::unix::process::CommandExt;
        let mut elsewhere = std::process::Command::new("sleep")
            .arg("10")
            .process_group(0)
            .spawn()
            .expect("start sleep");
        let pid = Pid::from_raw(elsewhere.id() as i32).expect("a pid");
        let got = action(from_terminal(Signal::INT), pid);
        let _ = elsewhere.kill();
        let _ = elsewhere.wait();
        assert_eq!(got, Action::PassOn);
    }
}
