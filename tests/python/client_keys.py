"""Write a fixed set of metric definitions with process identifier "python",
for byte-for-byte comparison with the same definitions written from Rust
(tests/integration/client_interop.rs, `python_and_rust_files_are_byte_identical`).

Usage: PROMETHEUS_MULTIPROC_DIR=... client_keys.py [PROCESS_ID]

With PROCESS_ID, reopens that process's files instead (pid reuse) and adds 1
to one counter child, as a Python process reusing a Rust worker's pid would.
"""
import sys

from prometheus_client import values

process_id = sys.argv[1] if len(sys.argv) > 1 else "python"
values.ValueClass = values.MultiProcessValue(lambda: process_id)

from prometheus_client import Counter, Gauge, Histogram, Summary  # noqa: E402

MODES = ["all", "liveall", "min", "livemin", "max", "livemax", "sum", "livesum",
         "mostrecent", "livemostrecent"]

labelled = Counter("c_total", 'Counter help \u00e9 "q" \\ \n\t\x01\x7f \U0001F600', ["b", "a"])
plain = Counter("plain", "")
gauges = [Gauge(f"g_{m}", f"Gauge {m}", ["l"], multiprocess_mode=m) for m in MODES]
hist = Histogram("h", "H", ["l"], buckets=[2.5e-7, 0.1, 1, 1e6])
hist_default = Histogram("hd", "Default buckets")
summ = Summary("s", "S", ["l"])
summ_plain = Summary("sp", "")

if len(sys.argv) > 1:
    labelled.labels("x", "y").inc()
    sys.exit(0)

labelled.labels("x", "y").inc(2)
labelled.labels("\u00e9", "\U0001F600 \"/\\").inc()
plain.inc(3)
for m, g in zip(MODES, gauges):
    child = g.labels("v")
    if m not in ("mostrecent", "livemostrecent"):
        child.set(1.5)
        child.inc(2)
hist.labels("v").observe(0.5)
hist.labels("w").observe(5e6)
hist_default.observe(0.03)
summ.labels("v").observe(2.5)
summ_plain.observe(-1)
