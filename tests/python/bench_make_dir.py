"""Builds a benchmark directory with the real prometheus_client: WORKERS
forked processes, each writing 4 files (a counter, a gauge in mode `all`, a
gauge in mode `livesum`, a histogram with the default buckets), with LABELS
label sets each, as a pre-fork server's workers do.

Usage: bench_make_dir.py DIR WORKERS [--labels N] [--seed S]

DIR must not exist or be empty. Values are pseudo-random but reproducible
(seeded by --seed and the worker's index). Prints "files N" when done.
"""

import argparse
import os
import random
import sys

parser = argparse.ArgumentParser()
parser.add_argument("dir")
parser.add_argument("workers", type=int)
parser.add_argument("--labels", type=int, default=10)
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()

os.makedirs(args.dir, exist_ok=True)
if any(name.endswith(".db") for name in os.listdir(args.dir)):
    sys.exit(f"{args.dir} already has *.db files")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = args.dir

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402

REQUESTS = Counter("bench_requests", "Requests served.", ["route", "code"])
BUSY = Gauge("bench_busy_ratio", "Busy ratio per worker.", ["route"], multiprocess_mode="all")
RUNNING = Gauge("bench_running", "Requests running.", ["route"], multiprocess_mode="livesum")
LATENCY = Histogram("bench_latency_seconds", "Request latency.", ["route"])


def work(index):
    rng = random.Random(args.seed * 1_000_003 + index)
    for i in range(args.labels):
        route = f"/api/v1/route{i}"
        REQUESTS.labels(route, "200").inc(rng.randint(1, 10_000))
        BUSY.labels(route).set(rng.random())
        RUNNING.labels(route).set(rng.randint(0, 8))
        for _ in range(rng.randint(1, 20)):
            LATENCY.labels(route).observe(rng.expovariate(4.0))


BATCH = 32
children = []
for index in range(args.workers):
    pid = os.fork()
    if pid == 0:
        try:
            work(index)
        finally:
            os._exit(0)
    children.append(pid)
    if len(children) >= BATCH:
        for child in children:
            os.waitpid(child, 0)
        children = []
for child in children:
    _, status = os.waitpid(child, 0)
print("files", sum(1 for n in os.listdir(args.dir) if n.endswith(".db")))
