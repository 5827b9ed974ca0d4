"""One writer process of the polling benchmark (bench_poll.py): the real
prometheus_client in multiprocess mode, with bench_make_dir.py's metric
definitions, updating them at a steady rate as a busy worker does.

Usage: bench_poll_writer.py DIR SECONDS OPS_PER_SECOND SEED

Each round updates one label set's four metrics (counter `inc`, histogram
`observe`, gauge `all` and gauge `livesum` `set`: four operations); rounds
are paced in 10 ms ticks. Prints "ready" once every label set exists (its
files are written), and the operations done when it stops: after SECONDS,
on SIGTERM or SIGINT, or when its parent is gone.
"""

import os
import random
import signal
import sys
import time

directory, seconds, rate, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402

# The same definitions as bench_make_dir.py, so the writers add to the
# directory's series instead of making new families.
REQUESTS = Counter("bench_requests", "Requests served.", ["route", "code"])
BUSY = Gauge("bench_busy_ratio", "Busy ratio per worker.", ["route"], multiprocess_mode="all")
RUNNING = Gauge("bench_running", "Requests running.", ["route"], multiprocess_mode="livesum")
LATENCY = Histogram("bench_latency_seconds", "Request latency.", ["route"])

LABELS = 10
OPS_PER_ROUND = 4
TICK = 0.01

stopping = False


def stop(_signum, _frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)

# Children looked up once, as an instrumented server keeps them.
routes = [f"/api/v1/route{i}" for i in range(LABELS)]
children = [(REQUESTS.labels(r, "200"), BUSY.labels(r), RUNNING.labels(r), LATENCY.labels(r)) for r in routes]
print("ready", flush=True)

rng = random.Random(seed)
parent = os.getppid()
rounds_per_tick = rate / OPS_PER_ROUND * TICK
deadline = time.monotonic() + seconds
next_tick = time.monotonic()
owed = 0.0
ops = 0
index = 0
while not stopping and time.monotonic() < deadline and os.getppid() == parent:
    owed += rounds_per_tick
    while owed >= 1.0:
        owed -= 1.0
        requests, busy, running, latency = children[index]
        index = (index + 1) % LABELS
        requests.inc()
        latency.observe(rng.expovariate(4.0))
        busy.set(rng.random())
        running.set(rng.randint(0, 8))
        ops += OPS_PER_ROUND
    next_tick += TICK
    pause = next_tick - time.monotonic()
    if pause > 0:
        time.sleep(pause)
    else:
        # Behind (the machine is busy): drop the missed ticks, do not burst.
        next_tick = time.monotonic()
print("ops", ops, flush=True)
