"""Records which signal multiprom run passed on, then exits with 10 + its
number. Usage: run_signals.py CONTROL_DIR
Writes CONTROL_DIR/ready once its handlers are installed and
CONTROL_DIR/got (the signal's name) when one arrives; gives up after 60 s.
"""

import os
import signal
import sys
import time


def note(control, name, text):
    tmp = os.path.join(control, "." + name)
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(control, name))


def main():
    control = sys.argv[1]

    def handler(signum, frame):
        note(control, "got", signal.Signals(signum).name)
        os._exit(10 + signum)

    for sig in (
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGWINCH,
        signal.SIGTTIN,
        signal.SIGTTOU,
    ):
        signal.signal(sig, handler)
    note(control, "ready", str(os.getpid()))
    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.05)
    sys.exit(99)


if __name__ == "__main__":
    main()
