"""What recording native histograms adds to prometheus_client's
``Histogram.observe()``, in one run (``just bench-native-python``).

usage: bench_native_observe.py DIR [--calls N] [--repeat R]

``observe(0.3)`` on a labelled child of a ``Histogram`` with the default
buckets, with ``multiprom.install(native_histograms=True)`` off and on,
with prometheus_client's own multiprocess value class and with multiprom's
writer (``install(writer=True)``); also ``multiprom.NativeHistogram``'s
``observe()``. Each configuration runs in a fresh interpreter (the opt-in
patches the class for the whole process), files in a directory of its own
under DIR; configurations alternate, R rounds, and each cell is the best
of all its runs of N calls. Prints a Markdown table.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

CONFIGS = [(value_class, native) for value_class in ('prometheus_client', 'multiprom')
           for native in ('off', 'on')]


def measure(value_class, native, calls):
    import multiprom

    multiprom.install(collector=False, writer=value_class == 'multiprom',
                      native_histograms=native == 'on')
    from prometheus_client import Histogram

    histogram = Histogram('bench_latency', 'Latency.', ['route'], registry=None).labels('/a')
    only = multiprom.NativeHistogram('bench_native', 'Native.', ['route'],
                                     registry=None).labels('/a')
    results = {}
    for name, metric in (('Histogram', histogram), ('NativeHistogram', only)):
        observe = metric.observe
        for _ in range(1000):
            observe(0.3)  # warm up
        best = None
        for _ in range(3):
            start = time.perf_counter_ns()
            for _ in range(calls):
                observe(0.3)
            elapsed = (time.perf_counter_ns() - start) / calls
            best = elapsed if best is None else min(best, elapsed)
        results[name] = best
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('dir')
    parser.add_argument('--calls', type=int, default=200_000)
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--one', nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(*args.one, args.calls)))
        return
    best = {}
    for _ in range(args.repeat):
        for value_class, native in CONFIGS:
            directory = os.path.join(args.dir, f'{value_class}-{native}')
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            env = {k: v for k, v in os.environ.items() if not k.startswith('MULTIPROM_')}
            env['PROMETHEUS_MULTIPROC_DIR'] = directory
            out = subprocess.run([sys.executable, __file__, args.dir, '--calls', str(args.calls),
                                  '--one', value_class, native], env=env, check=True,
                                 capture_output=True, text=True, timeout=600)
            for name, ns in json.loads(out.stdout).items():
                key = value_class, native, name
                best[key] = min(best.get(key, ns), ns)
    print('| value class | Histogram.observe() off ns/call | on ns/call | added '
          '| NativeHistogram.observe() ns/call |')
    print('| --- | ---: | ---: | ---: | ---: |')
    for value_class in ('prometheus_client', 'multiprom'):
        off = best[value_class, 'off', 'Histogram']
        on = best[value_class, 'on', 'Histogram']
        only = best[value_class, 'on', 'NativeHistogram']
        print(f'| {value_class} | {off:,.0f} | {on:,.0f} | {100 * (on - off) / off:+.0f}% '
              f'| {only:,.0f} |')


if __name__ == '__main__':
    main()
