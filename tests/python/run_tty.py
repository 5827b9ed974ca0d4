"""Runs `multiprom run -- PYTHON run_sigcount.py CONTROL_DIR` as the
foreground job of a new terminal (a pty), presses Ctrl-C once when the
command is ready, and prints JSON: multiprom's exit code, the number of
SIGINTs the command got, and what appeared on the terminal.
Usage: run_tty.py MULTIPROM PYTHON CONTROL_DIR   (every wait bounded: 60 s)
"""

import json
import os
import pty
import select
import signal
import sys
import time


def main():
    multiprom, python, control = sys.argv[1:4]
    counter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_sigcount.py")
    pid, master = pty.fork()
    if pid == 0:
        os.execv(multiprom, [multiprom, "run", "--listen", "127.0.0.1:0", "--",
                             python, counter, control])
    output = bytearray()
    deadline = time.time() + 60

    def drain(timeout):
        ready, _, _ = select.select([master], [], [], timeout)
        if ready:
            try:
                output.extend(os.read(master, 65536))
            except OSError:
                pass

    def give_up(what):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        sys.exit("%s within 60 s; terminal:\n%s" % (what, output.decode(errors="replace")))

    while not os.path.exists(os.path.join(control, "ready")):
        if time.time() > deadline:
            give_up("the command did not start")
        drain(0.05)
    os.write(master, b"\x03")  # Ctrl-C, as a person would press it
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            give_up("multiprom run did not exit")
        drain(0.05)
    drain(0.1)
    count_file = os.path.join(control, "count")
    count = int(open(count_file).read()) if os.path.exists(count_file) else None
    print(json.dumps({
        "exit": os.waitstatus_to_exitcode(status),
        "sigints": count,
        "terminal": output.decode(errors="replace"),
    }))


if __name__ == "__main__":
    main()
