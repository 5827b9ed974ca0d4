"""Per-call cost of prometheus_client's metric updates with its own
multiprocess value class and with multiprom's, in one run
(docs/benchmarks.md, "Python writer"; `just bench-writer`).

usage: bench_writer.py DIR [--calls N] [--repeat R]

Counter.inc(), Gauge.set() and Histogram.observe() through
prometheus_client's public API, on metrics made with
``prometheus_client.values.MultiProcessValue()``'s class and with
``multiprom.MultiProcessValue()``'s (default identifier ``os.getpid``),
each writing files in a directory of its own under DIR, and with a value
class that stores nothing (the floor: prometheus_client's own code and the
interpreter's thread switching). One thread makes N calls; then 8 threads
make N/8 calls each on the same metric at once, and the figure is the
total time over all N calls. Each cell is the best of R runs. Prints a
Markdown table.
"""

import argparse
import os
import shutil
import threading
import time

from prometheus_client import Counter, Gauge, Histogram, values

import multiprom

THREADS = 8


class NothingValue:
    """The floor: a value class that stores nothing. What it costs is
    prometheus_client's own Python code and the interpreter's thread
    switching, which every value class pays."""

    _multiprocess = False

    def __init__(self, *args, **kwargs):
        pass

    def inc(self, amount):
        pass

    def set(self, value, timestamp=None):
        pass

    def set_exemplar(self, exemplar):
        pass

    def get(self):
        return 0.0

    def get_exemplar(self):
        return None


def operations(cls):
    values.ValueClass = cls
    counter = Counter('bench_requests', 'Requests.', ['route'], registry=None).labels('/a')
    gauge = Gauge('bench_inflight', 'In flight.', ['route'], registry=None,
                  multiprocess_mode='livesum').labels('/a')
    histogram = Histogram('bench_latency', 'Latency.', ['route'], registry=None).labels('/a')
    return {
        'Counter.inc()': lambda n: [counter.inc() for _ in range(n)],
        'Gauge.set()': lambda n: [gauge.set(3.5) for _ in range(n)],
        'Histogram.observe()': lambda n: [histogram.observe(0.3) for _ in range(n)],
    }


def one_thread(op, calls):
    start = time.perf_counter_ns()
    op(calls)
    return (time.perf_counter_ns() - start) / calls


def threads(op, calls):
    barrier = threading.Barrier(THREADS + 1)

    def work():
        barrier.wait()
        op(calls)

    workers = [threading.Thread(target=work) for _ in range(THREADS)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter_ns()
    for worker in workers:
        worker.join()
    return (time.perf_counter_ns() - start) / (calls * THREADS)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('dir')
    parser.add_argument('--calls', type=int, default=200_000)
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()
    results = {}
    for side, factory in (('prometheus_client', values.MultiProcessValue),
                          ('multiprom', multiprom.MultiProcessValue),
                          ('floor', lambda: NothingValue)):
        directory = os.path.join(args.dir, side)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        os.environ['PROMETHEUS_MULTIPROC_DIR'] = directory
        for name, op in operations(factory()).items():
            op(1000)  # warm up
            results[side, name, 1] = min(one_thread(op, args.calls) for _ in range(args.repeat))
            results[side, name, THREADS] = min(threads(op, args.calls // THREADS)
                                               for _ in range(args.repeat))
        values.close_all_multiprocess_files()
    print('| operation | threads | prometheus_client ns/call | multiprom ns/call | speed-up '
          '| floor ns/call | multiprom 8 threads / 1 | floor 8 threads / 1 |')
    print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for name in ('Counter.inc()', 'Gauge.set()', 'Histogram.observe()'):
        for n in (1, THREADS):
            python, ours = results['prometheus_client', name, n], results['multiprom', name, n]
            floor = results['floor', name, n]
            ratios = ''
            if n == THREADS:
                ours_ratio = ours / results['multiprom', name, 1]
                floor_ratio = floor / results['floor', name, 1]
                ratios = f' {ours_ratio:.3f} | {floor_ratio:.3f} |'
            else:
                ratios = ' | |'
            print(f'| {name} | {n} | {python:,.0f} | {ours:,.0f} | {python / ours:.1f}x | {floor:,.0f} |{ratios}')


if __name__ == '__main__':
    main()
