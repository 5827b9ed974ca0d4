"""Polling cost of `multiprom serve`, as LLM routers poll model servers:
several clients each GET /metrics many times a second, and read a few
families. Measured in one run:

* a directory of WORKERS x 4 files made by the real prometheus_client
  (bench_make_dir.py, made afresh for each run and removed after it);
* WRITERS processes of the real prometheus_client in multiprocess mode
  (bench_poll_writer.py) updating the same metrics in that directory the
  whole time;
* `multiprom serve --dir DIR --listen 127.0.0.1:PORT`, polled by CLIENTS
  threads, each on one kept-alive connection, HZ times a second for
  SECONDS, asking for Prometheus text; once unfiltered, once with
  `name[]=` of a few sample names;
* per scenario: serve's processor time (user + system, /proc/PID/stat,
  over the polling window) per wall second (cores) and per scrape, the
  clients' latency (p50, p99, max), failed requests and scrapes done;
* beside it: Python's processor time for one `generate_latest` of the same
  directory (MultiProcessCollector on a fresh CollectorRegistry, a fresh
  process per run, median of --python-repeat) and what it would cost at
  the same poll rate.

Everything runs on loopback; every process it starts is stopped when it
ends, also on an error, Ctrl-C or SIGTERM (and, if this process is killed,
by the kernel: they get SIGTERM when it dies).

Usage: bench_poll.py --multiprom BIN [--base DIR] [--workers N] [--writers N]
                     [--writer-rate OPS] [--clients N] [--hz N] [--seconds S]
                     [--names a,b,...] [--python-repeat N] [--gzip]
"""

import argparse
import ctypes
import gzip
import http.client
import math
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_NAMES = ("bench_requests_total,bench_running,bench_latency_seconds_bucket,"
                 "bench_latency_seconds_sum,bench_latency_seconds_count")

# What a router's poll should cost (docs/benchmarks.md, "Polling").
TARGET_CORES_UNFILTERED = 0.10
TARGET_CORES_FILTERED = 0.03
TARGET_P99_MS = 50.0

parser = argparse.ArgumentParser()
parser.add_argument("--multiprom", required=True, help="the multiprom binary (a release build)")
parser.add_argument("--base", default="/dev/shm/multiprom-bench", help="where the run's directory is made")
parser.add_argument("--workers", type=int, default=1000, help="workers of the made directory (4 files each)")
parser.add_argument("--writers", type=int, default=8, help="prometheus_client processes updating it meanwhile")
parser.add_argument("--writer-rate", type=float, default=2000, help="operations per second per writer")
parser.add_argument("--clients", type=int, default=4, help="polling clients, one connection each")
parser.add_argument("--hz", type=float, default=20, help="polls per second per client")
parser.add_argument("--seconds", type=float, default=10, help="polling time per scenario")
parser.add_argument("--names", default=DEFAULT_NAMES, help="sample names of the filtered scenario")
parser.add_argument("--python-repeat", type=int, default=3, help="Python generate_latest runs (median)")
parser.add_argument("--gzip", action="store_true", help="ask for gzip, as Go's HTTP client does by default")
parser.add_argument("--serve-arg", action="append", default=[],
                    help="one more argument for `multiprom serve` (e.g. --serve-arg=--reap-dead); repeatable")
args = parser.parse_args()

PYTHON_SCRAPE = r"""
import sys, time
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
registry = CollectorRegistry()
MultiProcessCollector(registry, path=sys.argv[1])
start = time.process_time()
output = generate_latest(registry)
print(time.process_time() - start, len(output))
"""

HEADERS = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip" if args.gzip else "identity"}
REQUEST_TIMEOUT = 10.0
SCRAPES_PER_SECOND = args.clients * args.hz

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def stopped_with_this_process():
    """Runs in the child before exec: SIGTERM when this process dies, so a
    killed benchmark leaves nothing running."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def processor_seconds(pid):
    """User + system time of a whole process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def db_files(path):
    return sum(1 for name in os.listdir(path) if name.endswith(".db"))


def stop(proc, timeout=10):
    """SIGTERM, then SIGKILL if it has not exited within timeout; returns its stdout."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


class Poller(threading.Thread):
    """One client: GET path on one kept-alive connection every 1/hz seconds
    from start until end; a poll that falls behind skips the missed ticks
    (as a ticker does) instead of bursting."""

    def __init__(self, port, path, start, end, offset):
        super().__init__(daemon=True)
        self.port, self.path, self.start_at, self.end, self.offset = port, path, start, end, offset
        self.latencies, self.sizes = [], []
        self.failed, self.connections = 0, 0

    def run(self):
        period = 1.0 / args.hz
        connection = None
        next_at = self.start_at + self.offset
        while next_at < self.end:
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            began = time.perf_counter()
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
                    self.connections += 1
                connection.request("GET", self.path, headers=HEADERS)
                response = connection.getresponse()
                body = response.read()
                if response.status == 200:
                    self.sizes.append(len(body))
                else:
                    self.failed += 1
                if response.will_close:
                    connection.close()
                    connection = None
            except (OSError, http.client.HTTPException):
                self.failed += 1
                if connection is not None:
                    connection.close()
                connection = None
            self.latencies.append(time.perf_counter() - began)
            next_at += period
            late = time.monotonic() - next_at
            if late > 0:
                next_at += math.ceil(late / period) * period
        if connection is not None:
            connection.close()


def percentile(values, p):
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def get(port, path):
    """One GET on a new connection: (status, body decompressed)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        connection.request("GET", path, headers=HEADERS)
        response = connection.getresponse()
        body = response.read()
        if response.getheader("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return response.status, body
    finally:
        connection.close()


def wait_ready(port, serve):
    deadline = time.monotonic() + 60
    while True:
        try:
            status, _ = get(port, "/metrics")
            if status == 200:
                return
        except OSError:
            pass
        if serve.poll() is not None:
            sys.exit(f"multiprom serve exited with {serve.returncode} (log: {serve_log})")
        if time.monotonic() > deadline:
            sys.exit(f"multiprom serve did not answer within 60 s (log: {serve_log})")
        time.sleep(0.05)


def poll_scenario(port, serve, path):
    """Polls for args.seconds; returns the scenario's figures."""
    start = time.monotonic() + 0.1
    end = start + args.seconds
    period = 1.0 / args.hz
    pollers = [Poller(port, path, start, end, i * period / args.clients) for i in range(args.clients)]
    own_before = os.times()
    serve_before = processor_seconds(serve.pid)
    wall_before = time.monotonic()
    for poller in pollers:
        poller.start()
    for poller in pollers:
        poller.join(timeout=args.seconds + 2 * REQUEST_TIMEOUT + 5)
        if poller.is_alive():
            sys.exit("a polling client did not finish")
    serve_cpu = processor_seconds(serve.pid) - serve_before
    wall = time.monotonic() - wall_before
    own_after = os.times()
    latencies = [t for p in pollers for t in p.latencies]
    sizes = [s for p in pollers for s in p.sizes]
    scrapes = len(latencies)
    return {
        "scrapes": scrapes,
        "failed": sum(p.failed for p in pollers),
        "connections": sum(p.connections for p in pollers),
        "cores": serve_cpu / wall,
        "ms_per_scrape": serve_cpu * 1e3 / scrapes if scrapes else float("nan"),
        "p50": percentile(latencies, 50) * 1e3,
        "p99": percentile(latencies, 99) * 1e3,
        "max": max(latencies) * 1e3,
        "bytes": statistics.mean(sizes) if sizes else 0,
        "client_cores": (own_after.user + own_after.system - own_before.user - own_before.system) / wall,
    }


def python_scrape_cpu(path):
    out = subprocess.run([sys.executable, "-c", PYTHON_SCRAPE, path], check=True,
                         capture_output=True, text=True, timeout=300).stdout.split()
    return float(out[0]), int(out[1])


def terminate_on_sigterm(_signum, _frame):
    sys.exit(128 + signal.SIGTERM)


signal.signal(signal.SIGTERM, terminate_on_sigterm)

names = [n for n in args.names.split(",") if n]
filtered_path = "/metrics?" + "&".join("name[]=" + urllib.parse.quote(n, safe="") for n in names)
scenarios = [("unfiltered", "/metrics", TARGET_CORES_UNFILTERED),
             (f"name[] of {len(names)} sample names", filtered_path, TARGET_CORES_FILTERED)]
os.makedirs(args.base, exist_ok=True)
directory = os.path.join(args.base, f"poll-workers-{args.workers}")
serve_log = os.path.join(args.base, "poll-serve.log")
load_before = os.getloadavg()
writers, serve = [], None
results = []
try:
    if os.path.exists(directory):
        shutil.rmtree(directory)
    print(f"making {directory} ({args.workers} workers x 4 files) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "bench_make_dir.py"), directory, str(args.workers)],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)

    # Writers outlive the polling only if this process hangs; they are stopped below.
    writer_seconds = 2 * len(scenarios) * (args.seconds + 2 * REQUEST_TIMEOUT) + 120
    for i in range(args.writers):
        writers.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "bench_poll_writer.py"), directory, str(writer_seconds),
             str(args.writer_rate), str(i)],
            stdout=subprocess.PIPE, text=True, preexec_fn=stopped_with_this_process))
    deadline = time.monotonic() + 60
    for writer in writers:
        ready, _, _ = select.select([writer.stdout], [], [], max(0, deadline - time.monotonic()))
        if not ready or writer.stdout.readline().strip() != "ready":
            sys.exit("a writer did not start")
    writing_since = time.monotonic()

    port = free_port()
    with open(serve_log, "wb") as log:
        serve = subprocess.Popen([args.multiprom, "serve", "--dir", directory, "--listen", f"127.0.0.1:{port}",
                                  *args.serve_arg],
                                 stdout=subprocess.DEVNULL, stderr=log, preexec_fn=stopped_with_this_process)
    wait_ready(port, serve)
    files = db_files(directory)

    # Warm up (the first collection reads every file; the second maps
    # them), and see what each scenario answers.
    bodies = {}
    for _, path, _ in scenarios:
        for _ in range(3):
            status, body = get(port, path)
            if status != 200:
                sys.exit(f"GET {path} answered {status}")
        bodies[path] = body
    if b"\nbench_requests_total{" not in bodies["/metrics"]:
        sys.exit("the unfiltered body lacks bench_requests_total")
    # bench_busy_ratio is the family none of the default names asks for.
    filtering = "no" if b"\nbench_busy_ratio{" in bodies[filtered_path] else "yes"

    for label, path, target in scenarios:
        print(f"polling: {label} ...", file=sys.stderr, flush=True)
        results.append((label, target, poll_scenario(port, serve, path)))
        if serve.poll() is not None:
            sys.exit(f"multiprom serve exited with {serve.returncode} while polled (log: {serve_log})")
        time.sleep(1)

    stop(serve)
    serve = None
    writer_ops = 0
    for writer in writers:
        out = stop(writer)
        writer_ops += sum(int(line.split()[1]) for line in out.splitlines() if line.startswith("ops "))
    writers = []
    writer_rate = writer_ops / (time.monotonic() - writing_since) / max(1, args.writers)

    print(f"Python generate_latest x {args.python_repeat} ...", file=sys.stderr, flush=True)
    python_runs = [python_scrape_cpu(directory) for _ in range(args.python_repeat)]
except KeyboardInterrupt:
    sys.exit(128 + signal.SIGINT)
finally:
    if serve is not None:
        stop(serve)
    for writer in writers:
        stop(writer)
    if os.path.exists(directory):
        shutil.rmtree(directory, ignore_errors=True)

load_after = os.getloadavg()
python_ms = statistics.median(t for t, _ in python_runs) * 1e3
python_cores = python_ms * SCRAPES_PER_SECOND / 1e3

print()
print(f"{files:,} files ({args.workers} workers x 4 + {args.writers} writers' own), {args.writers} writers "
      f"asked for {args.writer_rate:,.0f} ops/s each, did {writer_rate:,.0f}, {args.clients} clients x "
      f"{args.hz:g} Hz for {args.seconds:g} s each ({SCRAPES_PER_SECOND:g} scrapes/s), "
      f"Accept-Encoding {HEADERS['Accept-Encoding']}; load average {load_before[0]:.2f} before, "
      f"{load_after[0]:.2f} after; filtered by the server: {filtering}")
print()
print("| scenario | scrapes | failed | `serve` cores | target | processor time per scrape | "
      "latency p50 | p99 | max | response |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for label, target, r in results:
    print(f"| {label} | {r['scrapes']} | {r['failed']} | {r['cores']:.3f} | <= {target:.2f} | "
          f"{r['ms_per_scrape']:.2f} ms | {r['p50']:.2f} ms | {r['p99']:.2f} ms | {r['max']:.2f} ms | "
          f"{r['bytes'] / 1e3:,.0f} kB |")  # as sent (gzipped with --gzip)
print(f"| Python `generate_latest` (median of {args.python_repeat}: "
      f"{', '.join(f'{t * 1e3:.0f}' for t, _ in python_runs)} ms) | | | {python_cores:.2f} (at "
      f"{SCRAPES_PER_SECOND:g}/s) | | {python_ms:.1f} ms | | | | {python_runs[0][1] / 1e3:,.0f} kB |")
print()
for label, target, r in results:
    verdict = []
    verdict.append(f"cores {r['cores']:.3f} {'<=' if r['cores'] <= target else '>'} {target:.2f}")
    verdict.append(f"p99 {r['p99']:.1f} ms {'<=' if r['p99'] <= TARGET_P99_MS else '>'} {TARGET_P99_MS:g} ms")
    verdict.append(f"failed {r['failed']}")
    met = r["cores"] <= target and r["p99"] <= TARGET_P99_MS and r["failed"] == 0
    print(f"{label}: {'met' if met else 'NOT met'} ({'; '.join(verdict)}); "
          f"{r['connections']} connections; clients used {r['client_cores']:.3f} cores")
