"""Counts the SIGINTs it gets. Writes CONTROL_DIR/ready once its handler is
installed; after the first SIGINT waits a second for more, then writes the
count to CONTROL_DIR/count and exits 0. Gives up after 60 s (exit 99).
Usage: run_sigcount.py CONTROL_DIR
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
    received = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(time.time()))
    note(control, "ready", str(os.getpid()))
    deadline = time.time() + 60
    while time.time() < deadline:
        if received and time.time() > received[0] + 1.0:
            note(control, "count", str(len(received)))
            sys.exit(0)
        time.sleep(0.02)
    sys.exit(99)


if __name__ == "__main__":
    main()
