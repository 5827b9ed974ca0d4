"""Side-by-side scrape benchmark, in one run, on the same directories:

* Python: a fresh process that imports prometheus_client, builds a registry
  with `MultiProcessCollector` and calls `generate_latest` once (the time is
  that call; the memory is the process's peak RSS);
* `multiprom scrape`: the whole process (wall time from spawn to exit, peak
  RSS);
* `multiprom serve`: `GET /metrics` on a warm server (the median of
  --repeat requests after two warm-up requests, on one kept-alive
  connection as Prometheus scrapes), its peak RSS (VmHWM) and
  what it allocated itself (RssAnon; mapped files count as RssFile or
  RssShmem: that is page cache the workers already use).

Each directory is made once with real prometheus_client writers
(bench_make_dir.py: WORKERS forked processes x 4 files) and kept, so a
re-run measures the same files. Extra existing directories (for example
the collector bench's vLLM-like `realistic` set) can be added with --dir.

Every multiprom output is checked byte-equal to Python's (serve's up to its
own multiprom_* families, which it appends) before timing.

With --compare BIN, a second build is measured in turn with the first on
the same directories (the scrapes alternate), and a second table puts the
two side by side.

Usage: bench_scrape.py --multiprom BIN [--base DIR] [--workers 100,1000,4000]
                       [--dir EXTRA]... [--repeat N] [--compare BIN]
"""

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--multiprom", required=True, help="the multiprom binary (a release build)")
parser.add_argument("--base", default="/dev/shm/multiprom-bench", help="where the made directories live")
parser.add_argument("--workers", default="100,1000,4000", help="workers per made directory (4 files each)")
parser.add_argument("--dir", action="append", default=[], help="an existing directory to add")
parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (median)")
parser.add_argument("--compare", metavar="BIN",
                    help="a second multiprom binary (the build before a change), measured in turn with the "
                         "first on the same directories; its figures go in a second table")
args = parser.parse_args()

PYTHON_SCRAPE = r"""
import os, sys, time
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
registry = CollectorRegistry()
MultiProcessCollector(registry, path=sys.argv[1])
start = time.perf_counter()
output = generate_latest(registry)
elapsed = time.perf_counter() - start
if len(sys.argv) > 2:
    with open(sys.argv[2], "wb") as f:
        f.write(output)
print(elapsed)
"""


def db_files(path):
    return sum(1 for name in os.listdir(path) if name.endswith(".db"))


def made_dir(workers):
    path = os.path.join(args.base, f"workers-{workers}")
    if os.path.isdir(path) and db_files(path) == 4 * workers:
        return path
    if os.path.isdir(path):
        sys.exit(f"{path} exists but does not have {4 * workers} files: remove it")
    print(f"making {path} ({workers} workers x 4 files) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "bench_make_dir.py"), path, str(workers)],
                   check=True, stdout=subprocess.DEVNULL)
    return path


def run_measured(argv, stdout=subprocess.DEVNULL):
    """Runs argv to completion; returns (wall seconds, peak RSS bytes, stdout)."""
    read_end, write_end = os.pipe() if stdout is subprocess.PIPE else (None, None)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=write_end if write_end is not None else stdout)
    if write_end is not None:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as f:
            out = f.read()
    else:
        out = b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} exited with {proc.returncode}")
    return wall, usage.ru_maxrss * 1024, out


def python_scrape(path, output=None):
    argv = [sys.executable, "-c", PYTHON_SCRAPE, path] + ([output] if output else [])
    _, rss, out = run_measured(argv, stdout=subprocess.PIPE)
    return float(out.decode().strip()), rss


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                fields[key] = int(value.split()[0]) * 1024
    return fields


def serve_warm(path, binary):
    port = free_port()
    proc = subprocess.Popen([binary, "serve", "--dir", path, "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    body = response.read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    sys.exit("multiprom serve did not answer")
                time.sleep(0.05)
        # One kept-alive connection, as Prometheus scrapes.
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        times = []
        for i in range(args.repeat + 2):
            start = time.perf_counter()
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            body = response.read()
            if i >= 2:
                times.append(time.perf_counter() - start)
        connection.close()
        status = proc_status(proc.pid)
        return statistics.median(times), status, body
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def mb(n):
    return f"{n / 1e6:.1f} MB"


def ms(s):
    return f"{s * 1e3:.1f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


directories = [made_dir(int(w)) for w in args.workers.split(",") if w] + args.dir
rows = []
for path in directories:
    files = db_files(path)
    print(f"== {path}: {files} files", file=sys.stderr, flush=True)
    reference = os.path.join(args.base, "python-output.prom")
    python_scrape(path, reference)
    with open(reference, "rb") as f:
        expected = f.read()
    _, _, scraped = run_measured([args.multiprom, "scrape", "--dir", path], stdout=subprocess.PIPE)
    if scraped != expected:
        sys.exit(f"{path}: multiprom scrape's output differs from Python's ({reference})")

    py = [python_scrape(path) for _ in range(args.repeat)]
    py_time = statistics.median(t for t, _ in py)
    py_rss = max(r for _, r in py)
    binaries = [args.multiprom] + ([args.compare] if args.compare else [])
    # The binaries take turns, so a change in the machine's load falls on both.
    runs = {b: [] for b in binaries}
    for _ in range(args.repeat):
        for binary in binaries:
            runs[binary].append(run_measured([binary, "scrape", "--dir", path]))
    for binary in binaries:
        mp = runs[binary]
        mp_time = statistics.median(t for t, _, _ in mp)
        mp_rss = max(r for _, r, _ in mp)
        warm, status, body = serve_warm(path, binary)
        # serve appends its own multiprom_* families after the workers'.
        if not body.startswith(expected) or not body[len(expected):].startswith(b"# HELP multiprom_"):
            sys.exit(f"{path}: {binary} serve's output differs from Python's ({reference})")
        rows.append((binary, path, files, py_time, py_rss, mp_time, mp_rss, warm, status))

print("| directory | files | Python `generate_latest` | its peak RSS | `multiprom scrape` (whole process) | its peak RSS | "
      "`serve` warm GET | `serve` peak RSS | `serve` RssAnon | scrape speed-up | warm speed-up | scrape RSS / Python's |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for binary, path, files, py_time, py_rss, mp_time, mp_rss, warm, status in rows:
    if binary != args.multiprom:
        continue
    print(f"| {os.path.basename(path)} | {files:,} | {ms(py_time)} | {mb(py_rss)} | {ms(mp_time)} | {mb(mp_rss)} | "
          f"{ms(warm)} | {mb(status['VmHWM'])} | {mb(status['RssAnon'])} | {py_time / mp_time:.1f}x | "
          f"{py_time / warm:.0f}x | {mp_rss / py_rss:.2f}x |")

if args.compare:
    print()
    print(f"Side by side, in turns: {args.multiprom} against {args.compare} (compared)")
    print()
    print("| directory | `multiprom scrape` | compared | `serve` warm GET | compared | `serve` peak RSS | compared |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    by = {(b, p): (t, w, st) for b, p, _, _, _, t, _, w, st in rows}
    for path in directories:
        (t, w, st), (ct, cw, cst) = by[(args.multiprom, path)], by[(args.compare, path)]
        print(f"| {os.path.basename(path)} | {ms(t)} | {ms(ct)} | {ms(w)} | {ms(cw)} | {mb(st['VmHWM'])} | "
              f"{mb(cst['VmHWM'])} |")
