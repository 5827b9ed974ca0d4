"""Reference timings of prometheus_client's multiprocess updates, for the
Client section of docs/benchmarks.md (the Rust side is
`cargo bench -p multiprom-client`).

Usage: client_bench.py   (prints one line per operation: name, ns per call)
"""
import os
import shutil
import tempfile
import timeit

directory = tempfile.mkdtemp(prefix="multiprom-pybench-")
# Must be set before prometheus_client is imported: it picks the value class then.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402

counter = Counter("requests_total", "Requests")
gauge = Gauge("temperature", "Temperature", multiprocess_mode="livemax")
histogram = Histogram("latency_seconds", "Latency")
family = Counter("http_requests_total", "Requests", ["method", "code"])
for code in ["200", "201", "204", "301", "302", "400", "401", "404", "500", "503"]:
    family.labels("GET", code)

cases = {
    "counter_inc": counter.inc,
    "gauge_set": lambda: gauge.set(21.5),
    "histogram_observe": lambda: histogram.observe(0.3),
    "labelled_lookup_inc": lambda: family.labels("GET", "404").inc(),
}
number = 200_000
try:
    for name, fn in cases.items():
        best = min(timeit.repeat(fn, number=number, repeat=5)) / number
        print(f"{name} {best * 1e9:.0f} ns")
finally:
    shutil.rmtree(directory)
