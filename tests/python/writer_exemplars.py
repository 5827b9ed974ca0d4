"""Exemplars through multiprom's value class (tests/integration/python_package.rs).

usage: writer_exemplars.py WORKDIR

With ``multiprom.install(writer=True, collector=False)``, plain prometheus_client calls
(``inc(exemplar=...)``, ``observe(..., exemplar=...)``) keep their
exemplars, in the process's own ``exemplars/*.exemplars`` files, a forked
child's in its own; ``get_exemplar()`` gives them back. prometheus_client's
own collector prints exactly what it prints without the exemplar files,
and multiprom's collector serves the latest exemplar per series and bucket
in OpenMetrics. What the storage cannot take (labels over OpenMetrics'
limit, an exemplar directory that cannot be made) loses the exemplar, is
logged, and never fails the update.

Prints one line per check; exits non-zero at the first failure.
"""

import logging
import os
import shutil
import sys
import time

WORK = sys.argv[1]
DIR = os.path.join(WORK, "metrics")
os.makedirs(DIR)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = DIR

import multiprom  # noqa: E402

# The writer only: prometheus_client keeps its own collector, which is
# compared below with and without the exemplar files.
multiprom.install(writer=True, collector=False)

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, values  # noqa: E402
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest  # noqa: E402
from prometheus_client.samples import Exemplar  # noqa: E402


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


records = Records()
logging.getLogger("multiprom").addHandler(records)


def check(what, ok, detail=""):
    if not ok:
        sys.exit(f"FAILED: {what}: {detail}")
    print(f"{what}: ok")


check("prometheus_client uses multiprom's value class",
      values.ValueClass.__module__.startswith("multiprom"), values.ValueClass.__module__)

requests = Counter("req", "Requests.", ["path"])
latency = Histogram("lat", "Latency.", buckets=(0.1, 1.0))
before = time.time()
requests.labels("/a").inc(exemplar={"trace_id": "a1"})
latency.observe(0.05, exemplar={"trace_id": "h1"})
latency.observe(0.5, exemplar={"trace_id": "h2"})
latency.observe(0.06, exemplar={"trace_id": "h3"})
after = time.time()

got = requests.labels("/a")._value.get_exemplar()
check("get_exemplar gives back what inc stored",
      isinstance(got, Exemplar) and got.labels == {"trace_id": "a1"} and got.value == 1.0
      and before <= got.timestamp <= after, got)
bucket = latency._buckets[0].get_exemplar()
check("the latest exemplar of a bucket replaces the one before", bucket.labels == {"trace_id": "h3"}
      and bucket.value == 0.06, bucket)
check("a bucket without exemplars has none", latency._buckets[2].get_exemplar() is None)

# A forked child keeps its exemplars in its own file, never the parent's.
time.sleep(0.01)
child = os.fork()
if child == 0:
    try:
        requests.labels("/a").inc(2, exemplar={"trace_id": "child"})
        ok = requests.labels("/a")._value.get_exemplar().labels == {"trace_id": "child"}
        os._exit(0 if ok else 3)
    except BaseException:  # noqa: B036 -- the child must exit, never return
        os._exit(4)
_, status = os.waitpid(child, 0)
check("the child recorded an exemplar", status == 0, status)
pid = os.getpid()
listed = sorted(os.listdir(os.path.join(DIR, "exemplars")))
check("each process has its own exemplar files", listed == sorted(
    [f"counter_{pid}.exemplars", f"histogram_{pid}.exemplars", f"counter_{child}.exemplars"]), listed)
check("the parent's exemplar is untouched by the child",
      requests.labels("/a")._value.get_exemplar().labels == {"trace_id": "a1"})


def python_collector(path):
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)
    return generate_latest(registry), openmetrics_latest(registry)


without = DIR + "-without-exemplars"
shutil.copytree(DIR, without, ignore=shutil.ignore_patterns("exemplars"))
check("prometheus_client's collector prints the same with and without the exemplar files",
      python_collector(DIR) == python_collector(without), python_collector(DIR)[1].decode())
check("... and prints no exemplar", b"trace_id" not in python_collector(DIR)[1])

registry = CollectorRegistry()
multiprom.MultiProcessCollector(registry, path=DIR)
served = openmetrics_latest(registry).decode()
child_exemplar = [line for line in served.splitlines() if line.startswith("req_total{")]
check("multiprom's collector serves the latest exemplar across processes",
      len(child_exemplar) == 1 and child_exemplar[0].startswith('req_total{path="/a"} 3.0 # {trace_id="child"} 2.0 '),
      served)
check("... and each bucket's latest, on its bucket",
      'lat_bucket{le="0.1"} 2.0 # {trace_id="h3"} 0.06 ' in served
      and 'lat_bucket{le="1.0"} 3.0 # {trace_id="h2"} 0.5 ' in served
      and 'lat_bucket{le="+Inf"} 3.0\n' in served, served)
check("... never in the text format", b"trace_id" not in generate_latest(registry))

# Labels over OpenMetrics' 128 code points, set through the value itself
# (prometheus_client's metrics refuse them before): dropped and logged.
requests.labels("/a")._value.set_exemplar(Exemplar({"trace_id": "x" * 200}, 1.0, time.time()))
check("an exemplar the storage cannot take is dropped, the one before stays",
      requests.labels("/a")._value.get_exemplar().labels == {"trace_id": "a1"})
check("... and logged", any("exemplar dropped" in m for m in records.messages), records.messages)

# An exemplar directory that cannot be made: updates go on, logged once.
blocked = os.path.join(WORK, "blocked")
os.makedirs(blocked)
with open(os.path.join(blocked, "exemplars"), "w") as f:
    f.write("a file where the directory would go\n")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = blocked
values.ValueClass = multiprom.MultiProcessValue(lambda: "blocked")
records.messages.clear()
counter = Counter("blocked", "Blocked.", registry=None)
counter.inc(exemplar={"trace_id": "b1"})
counter.inc(exemplar={"trace_id": "b2"})
check("updates go on when exemplars cannot be kept", counter._value.get() == 2.0)
check("... which is logged once", len([m for m in records.messages if "cannot keep exemplars" in m]) == 1,
      records.messages)
