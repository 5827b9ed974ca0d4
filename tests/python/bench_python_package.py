"""In-process scrape benchmark for docs/benchmarks.md ("Python package"):
`generate_latest(registry)` with prometheus_client's MultiProcessCollector,
with the prometheus_client_python_speedups merge, and with multiprom's
drop-in, cold and warm, on one directory.

usage: bench_python_package.py DIR [--workers 1000] [--repeat 15]

Builds DIR (if it has no *.db files yet) the way an application server
does: WORKERS forked processes, each writing through the real
prometheus_client a counter, a gauge in mode `all`, a gauge in mode
`livesum` and a histogram (default buckets), 10 label sets each: 4 files per
worker. Then times, best of REPEAT with the median:

  python            MultiProcessCollector (prometheus_client 0.26)
  speedups          prometheus_client_python_speedups.merge() in a collector,
                    its results turned into prometheus_client Metric objects
                    (its own classes cannot be encoded by generate_latest);
                    "not installed" if the package is missing
  multiprom cold    a new multiprom.MultiProcessCollector with an engine of
                    its own per scrape (nothing parsed yet), freed before
                    the next scrape's clock starts: a process's first
                    scrape keeps its engine for the next ones
  multiprom warm    one multiprom.MultiProcessCollector, scraped again and again

each as `collect` (the collector alone) and `scrape` (generate_latest of a
registry holding it: what a /metrics request costs); and, as `scrape` only,

  multiprom cold, installed / multiprom warm, installed
                    the same through the engine-encoded generate_latest
                    (what multiprom.install() or the first multiprom
                    collector puts in place; the rows above time
                    prometheus_client's own)
  multiprom cold, installed, beside a warm engine
                    cold again, once the warm collector keeps a directory
                    watch in the same process (the cold cases above are
                    timed before it has one)

and each way of adopting multiprom (docs/python.md) in a process of its
own, warm, through prometheus_client's multiprocess recipe
(bench_python_package_way.py):

  way: used in code, warm     multiprom.MultiProcessCollector in the code,
                              generate_latest imported before, no install()
  way: installed, warm        multiprom.install(), the recipe unchanged

Before timing it checks that every collector's output has the same lines as
Python's, and the installed generate_latest's the same bytes.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument('dir')
parser.add_argument('--workers', type=int, default=1000)
parser.add_argument('--repeat', type=int, default=15)
args = parser.parse_args()
os.makedirs(args.dir, exist_ok=True)
os.environ['PROMETHEUS_MULTIPROC_DIR'] = args.dir

# prometheus_client reads PROMETHEUS_MULTIPROC_DIR when first imported.
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest  # noqa: E402
from prometheus_client import values  # noqa: E402
from prometheus_client.metrics_core import Metric  # noqa: E402
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402
from prometheus_client.samples import Sample  # noqa: E402

import multiprom  # noqa: E402

try:
    import prometheus_client_python_speedups as speedups
except ImportError as error:
    speedups = None
    speedups_missing = repr(error)

ROUTES = [f'/v1/route{i}' for i in range(10)]


def worker(pid):
    """One application worker process: its four files, 10 label sets each."""
    values.ValueClass = values.MultiProcessValue(lambda: pid)
    requests = Counter('http_requests', 'Requests served.', ['route'])
    inflight = Gauge('http_inflight', 'Requests in flight per worker.', ['route'],
                     multiprocess_mode='all')
    queued = Gauge('http_queued', 'Requests queued.', ['route'], multiprocess_mode='livesum')
    latency = Histogram('http_latency_seconds', 'Request latency.', ['route'])
    for i, route in enumerate(ROUTES):
        requests.labels(route).inc(pid % 7 + i)
        inflight.labels(route).set(i)
        queued.labels(route).set(pid % 3)
        # Binary fractions: sums are exact in any order.
        latency.labels(route).observe((i + 1) / 8)


def build(directory, workers):
    if glob.glob(os.path.join(directory, '*.db')):
        return
    start = time.perf_counter()
    running = []
    for pid in range(100000, 100000 + workers):
        child = os.fork()
        if child == 0:
            try:
                worker(pid)
                os._exit(0)
            except BaseException:
                import traceback
                traceback.print_exc()
                os._exit(1)
        running.append(child)
        if len(running) >= 16:
            wait(running.pop(0))
    for child in running:
        wait(child)
    os.sync()
    print(f'built {directory}: {workers} workers in {time.perf_counter() - start:.1f} s')


def wait(child):
    _, status = os.waitpid(child, 0)
    if status:
        sys.exit(f'worker failed: {status}')


class SpeedupsCollector:
    """What a collector on prometheus_client_python_speedups has to do: its
    merge() returns its own Metric and Sample classes, which generate_latest
    cannot encode (no `.type`), so they become prometheus_client's."""

    def __init__(self, path):
        self.path = path

    def collect(self):
        out = []
        for m in speedups.merge(glob.glob(os.path.join(self.path, '*.db'))):
            metric = Metric(m.name, m.documentation, m.typ)
            metric.samples = [Sample(s.name, s.labels, s.value) for s in m.samples]
            out.append(metric)
        return out


# The engines of the cold cases, kept until the next scrape's clock starts.
cold_engines = []


def cold_collector():
    """A multiprom collector with an engine of its own, which has parsed
    nothing yet. (Collectors of one directory share one engine in a
    process, so a plain new collector would find the files parsed.)

    The engine is kept alive past the scrape and dropped before the next
    one is timed: a process's first scrape leaves its engine for the next
    scrapes, and does not pay for freeing it (see `timed`)."""
    collector = multiprom.MultiProcessCollector(None, path=args.dir)
    collector._engine = multiprom._native.DirCollector(args.dir)
    cold_engines.append(collector._engine)
    return collector


def registry_with(collector):
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def timed(fn):
    fn()  # warm-up, unmeasured (page cache, imports)
    times = []
    for _ in range(args.repeat):
        # The last cold engine is freed before the clock starts, not in the
        # next scrape (about 2.5 ms for 4,000 files).
        cold_engines.clear()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    cold_engines.clear()
    return min(times), statistics.median(times)


def lines(text):
    return sorted(text.decode().splitlines())


def main():
    build(args.dir, args.workers)
    files = glob.glob(os.path.join(args.dir, '*.db'))
    python = MultiProcessCollector(None, path=args.dir)
    # The first multiprom collector makes generate_latest engine-encoded for
    # a registry holding only it; the `scrape` rows time prometheus_client's
    # own encoder over the collector's objects.
    warm = multiprom.MultiProcessCollector(None, path=args.dir)
    engine_latest = generate_latest
    python_latest = generate_latest.__wrapped__
    reference = python_latest(registry_with(python))
    samples = sum(len(m.samples) for m in python.collect())
    print(f'files {len(files)}, samples {samples}, output {len(reference)} bytes')

    cases = [('python', python, lambda: python)]
    if speedups is not None:
        spd = SpeedupsCollector(args.dir)
        cases.append(('speedups', spd, lambda: spd))
    cases.append(('multiprom cold', None, cold_collector))
    cases.append(('multiprom warm', warm, lambda: warm))

    for name, _, make in cases:
        got = python_latest(registry_with(make()))
        if lines(got) != lines(reference):
            sys.exit(f'{name}: output lines differ from Python\'s')
    print('every output has the same lines as Python\'s')

    results = {}

    def time_installed(name, make):
        if engine_latest(registry_with(make())) != reference:
            sys.exit(f'{name}: output differs from Python\'s')
        scrape = timed(lambda: engine_latest(registry_with(make())))
        results[name] = (None, scrape)
        print(f'{name:26}   scrape {scrape[0] * 1e3:8.2f} ms (median {scrape[1] * 1e3:8.2f})')

    # The cold cases go before the warm collector is scraped again and
    # again: from its second scrape on it keeps a directory watch, whose
    # thread handles an event for each file a cold engine in the same
    # process opens (4,000 per cold scrape), which no process with one
    # engine per directory pays.
    for name, _, make in cases:
        collect = timed(lambda: make().collect())
        scrape = timed(lambda: python_latest(registry_with(make())))
        results[name] = (collect, scrape)
        print(f'{name:15} collect {collect[0] * 1e3:8.2f} ms (median {collect[1] * 1e3:8.2f})'
              f'   scrape {scrape[0] * 1e3:8.2f} ms (median {scrape[1] * 1e3:8.2f})')
        if name == 'multiprom cold':
            time_installed('multiprom cold, installed', cold_collector)
    if speedups is None:
        print(f'speedups        not installed: {speedups_missing}')
    time_installed('multiprom warm, installed', lambda: warm)
    # For comparison: a cold engine beside a warm one of the same directory.
    time_installed('multiprom cold, installed, beside a warm engine', cold_collector)
    for way, name in (('in-code', 'way: used in code, warm'), ('installed', 'way: installed, warm')):
        scrape = time_way(way, reference)
        results[name] = (None, scrape)
        print(f'{name:26}   scrape {scrape[0] * 1e3:8.2f} ms (median {scrape[1] * 1e3:8.2f})')
    metrics = warm.collect()
    encode = timed(lambda: python_latest(registry_with(Fixed(metrics))))
    print(f'encode only     generate_latest of collected Metric objects: {encode[0] * 1e3:.2f} ms '
          f'(median {encode[1] * 1e3:.2f})')
    base = results['python'][1][0]
    for name, (_, scrape) in results.items():
        print(f'python scrape / {name} scrape: {base / scrape[0]:.1f}x')


def time_way(way, reference):
    """(best, median) of `way`'s warm scrapes, in a process of its own."""
    with tempfile.NamedTemporaryFile(prefix='multiprom-bench-reference-') as f:
        f.write(reference)
        f.flush()
        out = subprocess.run(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          'bench_python_package_way.py'),
             way, args.dir, f.name, str(args.repeat)],
            capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f'{way}: {out.stderr.strip()}')
    times = json.loads(out.stdout)
    return times['best'], times['median']


class Fixed:
    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self):
        return self.metrics


if __name__ == '__main__':
    main()
