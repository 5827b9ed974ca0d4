"""What a push costs beside a warm scrape, in one run, on the same
directories: the CPU time `multiprom serve` spends per push (collect the
whole directory with native histograms and exemplars, encode, compress,
send) and per warm `GET /metrics` (text, and the protobuf format, which
also reads the native histograms), from the process's own utime + stime
(/proc/PID/stat) over a window of many operations, less what the same
process spends idle over the same time (its maintainer's liveness looks).

Pushes go to tests/python/push_sink.py (answers 204), every 100 ms; GETs
come every 100 ms on one kept-alive connection, as Prometheus scrapes
(which asks for gzip; also measured without).

Usage: bench_push.py --multiprom BIN [--base DIR] [--workers 1000] [--dir EXTRA]...
                     [--seconds 20]
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--multiprom", required=True, help="the multiprom binary (a release build)")
parser.add_argument("--base", default="/dev/shm/multiprom-bench", help="where the made directories live")
parser.add_argument("--workers", default="1000", help="workers per made directory (4 files each)")
parser.add_argument("--dir", action="append", default=[], help="an existing directory to add")
parser.add_argument("--seconds", type=float, default=20.0, help="the window of each measurement")
args = parser.parse_args()

TICKS = os.sysconf("SC_CLK_TCK")
EVERY = 0.1


def made_dir(workers):
    path = os.path.join(args.base, f"workers-{workers}")
    count = lambda: sum(1 for n in os.listdir(path) if n.endswith(".db"))
    if os.path.isdir(path) and count() == 4 * workers:
        return path
    if os.path.isdir(path):
        sys.exit(f"{path} exists but does not have {4 * workers} files: remove it")
    print(f"making {path} ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "bench_make_dir.py"), path, str(workers)],
                   check=True, stdout=subprocess.DEVNULL)
    return path


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sink(work):
    port_file, log = os.path.join(work, "port"), os.path.join(work, "requests.jsonl")
    sink = subprocess.Popen([sys.executable, os.path.join(HERE, "push_sink.py"), port_file, log])
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file):
        if time.monotonic() > deadline:
            sys.exit("the sink never listened")
        time.sleep(0.05)
    with open(port_file) as f:
        return sink, int(f.read()), log


def requests_logged(log):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f]


def serve(path, extra):
    port = free_port()
    proc = subprocess.Popen(
        [args.multiprom, "serve", "--dir", path, "--listen", f"127.0.0.1:{port}"] + extra,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("GET", "/metrics")
            conn.getresponse().read()
            return proc, conn
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("serve never answered")
            time.sleep(0.1)


def window(proc, step):
    """Runs step() every EVERY seconds for the window; returns CPU seconds used."""
    before = cpu_seconds(proc.pid)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        step()
        time.sleep(EVERY)
    return cpu_seconds(proc.pid) - before


def measure(path):
    row = {"dir": os.path.basename(path), "files": sum(1 for n in os.listdir(path) if n.endswith(".db"))}
    # Idle: what serve spends with no request and no push.
    proc, conn = serve(path, [])
    try:
        time.sleep(2)
        idle = window(proc, lambda: None) / args.seconds
        row["idle_cores"] = idle
        # A connection idle that long was closed by the server.
        conn = http.client.HTTPConnection("127.0.0.1", conn.port, timeout=120)

        protobuf = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
        for name, accept, encoding in (("text", "text/plain", "identity"),
                                       ("text_gzip", "text/plain", "gzip"),
                                       ("protobuf_gzip", protobuf, "gzip")):
            gets = 0

            def get():
                nonlocal gets
                conn.request("GET", "/metrics", headers={"Accept": accept, "Accept-Encoding": encoding})
                conn.getresponse().read()
                gets += 1

            for _ in range(3):
                get()
            gets = 0
            used = window(proc, get)
            row[f"get_{name}_ms"] = 1000 * (used - idle * args.seconds) / gets
    finally:
        proc.terminate()
        proc.wait()
    for name, flag in (("remote_write", "--push.remote-write"), ("otlp", "--push.otlp")):
        with tempfile.TemporaryDirectory() as work:
            sink, port, log = start_sink(work)
            url = f"http://127.0.0.1:{port}/v1/metrics"
            proc, _ = serve(path, [flag, url, "--push.interval", f"{int(EVERY * 1000)}ms"])
            try:
                deadline = time.monotonic() + 60
                while len(requests_logged(log)) < 3:
                    if time.monotonic() > deadline:
                        sys.exit(f"no {name} push arrived")
                    time.sleep(0.1)
                first = len(requests_logged(log))
                used = window(proc, lambda: None)
                logged = requests_logged(log)
                pushes = len(logged) - first
                row[f"push_{name}_ms"] = 1000 * (used - idle * args.seconds) / pushes
                row[f"push_{name}_bytes"] = logged[-1]["bytes"]
            finally:
                proc.terminate()
                proc.wait()
                sink.terminate()
                sink.wait()
    return row


def main():
    dirs = [made_dir(int(w)) for w in args.workers.split(",") if w] + args.dir
    rows = [measure(path) for path in dirs]
    load = os.getloadavg()[0]
    print(f"CPU ms per operation of `multiprom serve` ({args.seconds:.0f} s windows, one every "
          f"{EVERY * 1000:.0f} ms, less idle; load {load:.2f} at the end)\n")
    print("| directory | files | warm GET text | warm GET text, gzip | warm GET protobuf, gzip | "
          "push Remote-Write | push OTLP | Remote-Write body | OTLP body | idle |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['dir']} | {r['files']:,} | {r['get_text_ms']:.2f} ms | {r['get_text_gzip_ms']:.2f} ms | "
              f"{r['get_protobuf_gzip_ms']:.2f} ms | "
              f"{r['push_remote_write_ms']:.2f} ms | {r['push_otlp_ms']:.2f} ms | "
              f"{r['push_remote_write_bytes'] / 1024:.0f} KiB | {r['push_otlp_bytes'] / 1024:.0f} KiB | "
              f"{r['idle_cores']:.4f} cores |")


main()
