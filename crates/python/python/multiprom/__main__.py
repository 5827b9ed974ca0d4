"""The ``multiprom`` command: the wheel's console script and
``python -m multiprom``. It is the Rust CLI (the same subcommands, flags,
logs, exit statuses and signal handling as the ``multiprom`` binary), linked
into ``multiprom._native`` and run in this process.

Before Rust takes over, the process's signals are put the way a Rust
program starts with them, which Python's start-up changed:

* ``SIGINT`` has Python's handler (``KeyboardInterrupt``). The CLI's
  handlers (signal-hook) call the handler they replace, so every ``SIGINT``
  would also reach Python's, and ``KeyboardInterrupt`` would be raised the
  moment the CLI returns, replacing its exit status. Any Python handler of a
  signal the CLI handles goes back to the default for this reason.
* ``SIGXFSZ`` is ignored, and ignored signals are inherited: the command
  ``multiprom run`` starts would inherit it. It goes back to the default.
  (``SIGPIPE`` is ignored by Rust programs too, and Rust restores it for
  the commands they start.)

The GIL is released while the CLI runs, and the process ends with the CLI's
status through ``os._exit``: nothing Python does at exit can change it.
"""

import os
import signal
import sys

# The signals the CLI handles: `run` passes all but the last on, `serve` and
# `demo` stop on SIGINT and SIGTERM, and child processes end with SIGCHLD.
_HANDLED = (
    "SIGINT",
    "SIGTERM",
    "SIGHUP",
    "SIGQUIT",
    "SIGUSR1",
    "SIGUSR2",
    "SIGWINCH",
    "SIGTTIN",
    "SIGTTOU",
    "SIGCHLD",
)


def _signals_as_a_rust_program_has_them():
    for name in _HANDLED:
        number = getattr(signal, name)
        if callable(signal.getsignal(number)):
            signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)


def main():
    """Runs ``multiprom`` with ``sys.argv[1:]`` and exits with its status."""
    _signals_as_a_rust_program_has_them()
    from multiprom import _native

    code = _native.main(sys.argv[1:], [sys.executable, "-m", "multiprom"])
    # Anything Python itself buffered (the CLI writes to the descriptors).
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
