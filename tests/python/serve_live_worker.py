"""A live worker for the per-worker process metrics: sets a `liveall`
gauge (whose series carry this process's `pid` label), writes
CONTROL_DIR/ready with its pid, and stays alive until CONTROL_DIR/stop
appears (at most 60 s).
Usage: PROMETHEUS_MULTIPROC_DIR=... serve_live_worker.py CONTROL_DIR
"""

import os
import sys
import time

from prometheus_client import Gauge


def main():
    control = sys.argv[1]
    busy = Gauge("worker_busy", "Busy.", multiprocess_mode="liveall")
    busy.set(1)
    tmp = os.path.join(control, ".ready")
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.rename(tmp, os.path.join(control, "ready"))
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(os.path.join(control, "stop")):
        time.sleep(0.05)


if __name__ == "__main__":
    main()
