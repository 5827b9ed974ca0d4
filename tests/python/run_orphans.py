"""Leaves processes behind and checks that whoever inherits them reaps
them. Run as a pid namespace's first process's command (`multiprom run` as
pid 1): each orphan is reparented to multiprom, and once it has ended its
/proc entry must go (a zombie is still listed, with state Z).
Exits 0 when every orphan is gone within 20 s, 1 otherwise (with their
states on stderr).
"""

import os
import subprocess
import sys
import time


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            # "pid (comm) S ...": the state follows the last ")".
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        # Gone before the open, or between the open and the read (reaped
        # meanwhile: reading a dead process's entry fails with ESRCH).
        return None


def main():
    orphans = []
    for _ in range(5):
        # The shell starts a short sleep in the background and exits: the
        # sleep's parent is gone, so it is reparented to pid 1.
        out = subprocess.run(
            ["sh", "-c", "sleep 0.2 & echo $!"], capture_output=True, text=True, check=True
        )
        orphans.append(int(out.stdout))
    deadline = time.time() + 20
    while time.time() < deadline:
        states = {pid: state(pid) for pid in orphans}
        if all(s is None for s in states.values()):
            return 0
        time.sleep(0.05)
    print(f"orphans not reaped: {states}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
