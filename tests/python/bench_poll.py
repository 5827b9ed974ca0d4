"""Polling cost of `multiprom serve`, as LLM routers poll model servers:
several clients each GET /metrics many times a second, and read a few
families. Measured in one run:

* per directory shape (bench_shapes.py: `bench`, `vllm`, `exemplars`), a
  directory of about FILES files made by the real prometheus_client
  (bench_make_dir.py: exited workers' files; made afresh for each run and
  removed after it);
* WRITERS processes of the real prometheus_client in multiprocess mode
  (bench_poll_writer.py) updating the same metrics in that directory the
  whole time, WRITER_REQUESTS requests a second each;
* `multiprom serve --dir DIR --listen 127.0.0.1:PORT` (and, with
  --compare, a second binary serving the same directory), polled by
  CLIENTS threads, each on one kept-alive connection, HZ times a second
  for SECONDS, in each format (text, OpenMetrics, protobuf, gzipped text),
  once unfiltered and once with `name[]=` of the shape's few sample names;
  ROUNDS times, the binaries and scenarios taking turns;
* per scenario: serve's processor time (user + system, /proc/PID/stat,
  over the polling window) per wall second (cores) and per scrape, the
  clients' latency (p50, p99, max), failed requests and scrapes done; the
  round with the median processor time is shown, with the range;
* beside it: Python's processor time for one `generate_latest` of the same
  directory (MultiProcessCollector on a fresh CollectorRegistry, a fresh
  process per run, median of --python-repeat) and what it would cost at
  the same poll rate.

Everything runs on loopback; every process it starts is stopped when it
ends, also on an error, Ctrl-C or SIGTERM (and, if this process is killed,
by the kernel: they get SIGTERM when it dies).

Usage: bench_poll.py --multiprom BIN [--base DIR] [--shapes bench,vllm] [--files N]
                     [--writers N] [--writer-requests N] [--clients N] [--hz N]
                     [--seconds S] [--formats text,openmetrics,protobuf,gzip]
                     [--python-repeat N] [--serve-arg ARG]
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
sys.path.insert(0, HERE)
from bench_shapes import SHAPES  # noqa: E402

# What a router's poll should cost (docs/benchmarks.md, "Polling").
TARGET_CORES_UNFILTERED = 0.10
TARGET_CORES_FILTERED = 0.03
TARGET_P99_MS = 50.0
# Another shape of the same poll: within this factor of the text poll's cost.
TARGET_OTHER_FORMAT = 1.5

TEXT = "text/plain;version=0.0.4"
OPENMETRICS = "application/openmetrics-text;version=1.0.0"
PROTOBUF = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"

parser = argparse.ArgumentParser()
parser.add_argument("--multiprom", required=True, help="the multiprom binary (a release build)")
parser.add_argument("--base", default="/dev/shm/multiprom-bench", help="where the run's directories are made")
parser.add_argument("--shapes", default="bench,vllm,exemplars",
                    help="directory shapes to poll, in order (bench_shapes.py: bench, vllm, exemplars; "
                         "exemplars needs multiprom's Python package in this interpreter)")
parser.add_argument("--files", type=int, default=4000, help="files of each made directory (exited workers')")
parser.add_argument("--writers", type=int, default=8, help="prometheus_client processes updating it meanwhile")
parser.add_argument("--writer-requests", type=float, default=500,
                    help="requests per second per writer (bench: 4 operations each, vllm: 13)")
parser.add_argument("--clients", type=int, default=4, help="polling clients, one connection each")
parser.add_argument("--hz", type=float, default=20, help="polls per second per client")
parser.add_argument("--seconds", type=float, default=5, help="polling time per scenario and round")
parser.add_argument("--rounds", type=int, default=3,
                    help="times each scenario is polled (the serves and scenarios taking turns); the run "
                         "with the median processor time is shown")
parser.add_argument("--formats", default="text,openmetrics,protobuf,gzip",
                    help="what each poll asks for: text, openmetrics, protobuf, gzip (text gzipped); "
                         "each unfiltered and filtered")
parser.add_argument("--python-repeat", type=int, default=3, help="Python generate_latest runs (median)")
parser.add_argument("--compare", metavar="BIN",
                    help="a second multiprom binary (the build before a change), serving the same directory "
                         "at the same time and polled right after the first in each scenario")
parser.add_argument("--floor", metavar="BIN",
                    help="the fixed_answer example (crates/http/examples): polled with each scenario's "
                         "answer, as the floor of the HTTP side")
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

FORMATS = {
    "text": {"Accept": TEXT, "Accept-Encoding": "identity"},
    "openmetrics": {"Accept": OPENMETRICS, "Accept-Encoding": "identity"},
    "protobuf": {"Accept": PROTOBUF, "Accept-Encoding": "identity"},
    "gzip": {"Accept": TEXT, "Accept-Encoding": "gzip"},
}
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

    def __init__(self, port, path, headers, start, end, offset):
        super().__init__(daemon=True)
        self.port, self.path, self.headers = port, path, headers
        self.start_at, self.end, self.offset = start, end, offset
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
                connection.request("GET", self.path, headers=self.headers)
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


def get(port, path, headers=FORMATS["text"], raw=None):
    """One GET on a new connection: (status, body decompressed). With
    `raw` (a dict), also the body as sent and its content headers in it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        if raw is not None:
            raw.update(body=body, content_type=response.getheader("Content-Type", ""),
                       content_encoding=response.getheader("Content-Encoding", ""))
        if response.getheader("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return response.status, body
    finally:
        connection.close()


def wait_ready(port, serve, serve_log):
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


def poll_scenario(port, serve, path, headers):
    """Polls for args.seconds; returns the scenario's figures."""
    start = time.monotonic() + 0.1
    end = start + args.seconds
    period = 1.0 / args.hz
    pollers = [Poller(port, path, headers, start, end, i * period / args.clients) for i in range(args.clients)]
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


def poll_shape(shape_name):
    """Makes SHAPE's directory, starts its writers and `serve`, polls every
    scenario; returns (summary, [(label, target, figures)], python runs)."""
    shape = SHAPES[shape_name]
    workers = -(-args.files // shape.FILES_PER_WORKER)
    names = shape.NAMES
    filtered_path = "/metrics?" + "&".join("name[]=" + urllib.parse.quote(n, safe="") for n in names)
    scenarios = []
    for fmt in [f for f in args.formats.split(",") if f]:
        headers = FORMATS[fmt]
        scenarios.append((f"{fmt} unfiltered", "/metrics", headers, TARGET_CORES_UNFILTERED))
        scenarios.append((f"{fmt} name[] x{len(names)}", filtered_path, headers, TARGET_CORES_FILTERED))
    directory = os.path.join(args.base, f"poll-{shape_name}-{workers}")
    serve_log = os.path.join(args.base, f"poll-{shape_name}-serve.log")
    writers, serves = [], []
    results = []
    try:
        if os.path.exists(directory):
            shutil.rmtree(directory)
        print(f"making {directory} ({workers} workers x {shape.FILES_PER_WORKER} files) ...",
              file=sys.stderr, flush=True)
        env = dict(os.environ)
        if shape.NEEDS_WRITER:
            env["MULTIPROM_INSTALL"] = "writer"
        subprocess.run([sys.executable, os.path.join(HERE, "bench_make_dir.py"), directory, str(workers),
                        "--shape", shape_name], check=True, stdout=subprocess.DEVNULL, timeout=600, env=env)

        # Writers outlive the polling only if this process hangs; they are stopped below.
        writer_seconds = 2 * args.rounds * len(scenarios) * (args.seconds + 2 * REQUEST_TIMEOUT) + 120
        ops_per_second = args.writer_requests * shape.OPS_PER_ROUND
        for i in range(args.writers):
            writers.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, "bench_poll_writer.py"), directory, str(writer_seconds),
                 str(ops_per_second), str(i), shape_name],
                stdout=subprocess.PIPE, text=True, env=env, preexec_fn=stopped_with_this_process))
        deadline = time.monotonic() + 60
        for writer in writers:
            ready, _, _ = select.select([writer.stdout], [], [], max(0, deadline - time.monotonic()))
            if not ready or writer.stdout.readline().strip() != "ready":
                sys.exit("a writer did not start")
        writing_since = time.monotonic()

        binaries = [("", args.multiprom)] + ([(" (compared)", args.compare)] if args.compare else [])
        for suffix, binary in binaries:
            port = free_port()
            log_path = serve_log + (".compared" if suffix else "")
            with open(log_path, "wb") as log:
                serve = subprocess.Popen([binary, "serve", "--dir", directory, "--listen",
                                          f"127.0.0.1:{port}", *args.serve_arg],
                                         stdout=subprocess.DEVNULL, stderr=log,
                                         preexec_fn=stopped_with_this_process)
            serves.append((suffix, port, serve, log_path))
            wait_ready(port, serve, log_path)
        files = db_files(directory)

        # Warm up (the first collection reads every file; the second maps
        # them), and see that each scenario answers and the filter filters.
        filtering = "yes"
        answers = {}
        for label, path, headers, _ in scenarios:
            for _, port, _, _ in serves:
                for _ in range(3):
                    answers[label] = {}
                    status, body = get(port, path, headers, answers[label])
                    if status != 200:
                        sys.exit(f"GET {path} ({label}) answered {status}")
                unasked = shape.UNASKED.encode()
                if path == "/metrics" and unasked not in body:
                    sys.exit(f"the unfiltered body ({label}) lacks {shape.UNASKED}")
                if path != "/metrics" and unasked in body:
                    filtering = "no"

        runs = {}
        for round_number in range(args.rounds):
            for label, path, headers, target in scenarios:
                for suffix, port, serve, log_path in serves:
                    print(f"polling {shape_name}: {label}{suffix}, round {round_number + 1} ...",
                          file=sys.stderr, flush=True)
                    runs.setdefault((label + suffix, target), []).append(
                        poll_scenario(port, serve, path, headers))
                    if serve.poll() is not None:
                        sys.exit(f"multiprom serve exited with {serve.returncode} while polled "
                                 f"(log: {log_path})")
                    time.sleep(0.5)
        for (label, target), figures in runs.items():
            ordered = sorted(figures, key=lambda r: r["cores"])
            median = dict(ordered[len(ordered) // 2])
            median["spread"] = (ordered[0]["cores"], ordered[-1]["cores"])
            median["scrapes"] = sum(r["scrapes"] for r in figures)
            median["failed"] = sum(r["failed"] for r in figures)
            median["p99"] = max(r["p99"] for r in figures)
            median["max"] = max(r["max"] for r in figures)
            results.append((label, target, median))

        for _, _, serve, _ in serves:
            stop(serve)
        serves = []

        if args.floor:
            for label, path, headers, target in scenarios:
                answer = answers[label]
                body_path = os.path.join(args.base, "poll-floor-answer")
                with open(body_path, "wb") as f:
                    f.write(answer["body"])
                port = free_port()
                floor = subprocess.Popen([args.floor, f"127.0.0.1:{port}", body_path, answer["content_type"],
                                          answer["content_encoding"]],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         preexec_fn=stopped_with_this_process)
                serves.append(("", port, floor, body_path))
                wait_ready(port, floor, "(the floor server's stderr)")
                print(f"polling {shape_name}: {label} (floor) ...", file=sys.stderr, flush=True)
                figures = poll_scenario(port, floor, "/metrics", headers)
                figures["spread"] = (figures["cores"], figures["cores"])
                results.append((label + " (floor: fixed answer)", target, figures))
                stop(floor)
                serves = []
        writer_ops = 0
        for writer in writers:
            out = stop(writer)
            writer_ops += sum(int(line.split()[1]) for line in out.splitlines() if line.startswith("ops "))
        writers = []
        writer_rate = writer_ops / (time.monotonic() - writing_since) / max(1, args.writers)

        print(f"Python generate_latest x {args.python_repeat} ...", file=sys.stderr, flush=True)
        python_runs = [python_scrape_cpu(directory) for _ in range(args.python_repeat)]
    finally:
        for _, _, serve, _ in serves:
            stop(serve)
        for writer in writers:
            stop(writer)
        if os.path.exists(directory):
            shutil.rmtree(directory, ignore_errors=True)
    summary = (f"`{shape_name}`: {files:,} files ({workers} exited workers x {shape.FILES_PER_WORKER} + "
               f"{args.writers} writers' own), {args.writers} writers asked for {ops_per_second:,.0f} ops/s "
               f"each, did {writer_rate:,.0f}; filtered by the server: {filtering}")
    return summary, results, python_runs


def print_shape(shape_name, summary, results, python_runs):
    python_ms = statistics.median(t for t, _ in python_runs) * 1e3
    python_cores = python_ms * SCRAPES_PER_SECOND / 1e3
    print()
    print(summary)
    print()
    print(f"| scenario | scrapes | failed | `serve` cores (median of {args.rounds}; range) | target | "
          "processor time per scrape | latency p50 | p99 | max | response |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    def suffix(label):
        return label[label.find(" ("):] if " (" in label else ""

    text = {(target, suffix(label)): r for label, target, r in results if label.startswith("text ")}
    verdicts = []
    for label, target, r in results:
        limit = target
        key = (target, suffix(label))
        if not label.startswith("text ") and key in text:
            limit = max(target, TARGET_OTHER_FORMAT * text[key]["cores"])
        low, high = r["spread"]
        print(f"| {label} | {r['scrapes']} | {r['failed']} | {r['cores']:.3f} ({low:.3f}-{high:.3f}) | "
              f"<= {limit:.3f} | "
              f"{r['ms_per_scrape']:.2f} ms | {r['p50']:.2f} ms | {r['p99']:.2f} ms | {r['max']:.2f} ms | "
              f"{r['bytes'] / 1e3:,.0f} kB |")  # as sent (gzipped for gzip)
        met = r["cores"] <= limit and r["p99"] <= TARGET_P99_MS and r["failed"] == 0
        verdicts.append(f"{shape_name} {label}: {'met' if met else 'NOT met'} (cores {r['cores']:.3f}, "
                        f"p99 {r['p99']:.1f} ms, failed {r['failed']}); {r['connections']} connections; "
                        f"clients used {r['client_cores']:.3f} cores")
    print(f"| Python `generate_latest` (median of {args.python_repeat}: "
          f"{', '.join(f'{t * 1e3:.0f}' for t, _ in python_runs)} ms) | | | {python_cores:.2f} (at "
          f"{SCRAPES_PER_SECOND:g}/s) | | {python_ms:.1f} ms | | | | {python_runs[0][1] / 1e3:,.0f} kB |")
    print()
    for line in verdicts:
        print(line)


signal.signal(signal.SIGTERM, terminate_on_sigterm)
os.makedirs(args.base, exist_ok=True)
load_before = os.getloadavg()
shapes = []
try:
    for shape_name in [s for s in args.shapes.split(",") if s]:
        shapes.append((shape_name, *poll_shape(shape_name)))
except KeyboardInterrupt:
    sys.exit(128 + signal.SIGINT)
load_after = os.getloadavg()
print()
print(f"{args.clients} clients x {args.hz:g} Hz for {args.seconds:g} s each ({SCRAPES_PER_SECOND:g} scrapes/s); "
      f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
for shape in shapes:
    print_shape(*shape)
