"""Real forked Python workers write every metric type into PROMETHEUS_MULTIPROC_DIR,
then the parent prints (as JSON) what MmapedDict.read_all_values_from_file sees.

usage: format_python_writes.py   (PROMETHEUS_MULTIPROC_DIR must be set)

Some metrics are created before the fork (the usual pre-fork server pattern:
each child re-creates their keys in its own files on first use), some inside
the children.
"""

import json
import multiprocessing
import os
import sys

from prometheus_client import Counter, Gauge, Histogram, Summary

from format_common import TRICKY, TRICKY_HELP, dump_dir

MODES = ['all', 'liveall', 'min', 'livemin', 'max', 'livemax',
         'sum', 'livesum', 'mostrecent', 'livemostrecent']

# Created before the fork.
requests = Counter('interop_requests', TRICKY_HELP,
                   ['method', 'l\u00e4bel_\U0001F600', 'tricky'])
plain_total = Counter('interop_plain_total', 'A counter named with _total')
unicode_name = Counter('interop_\u00fcn\u00ef_\U0001F600', 'Unicode metric name \u2028')
gauges = {
    mode: Gauge(f'interop_gauge_{mode}', f'Gauge in mode {mode}: {TRICKY_HELP}',
                ['tricky'], multiprocess_mode=mode)
    for mode in MODES
}
latency = Histogram('interop_latency_seconds', TRICKY_HELP, ['tricky'])
custom = Histogram('interop_custom', 'Custom buckets',
                   buckets=[1e-5, 0.1, 0.25, 1, 2.5, 1e6, 1234567.0, 1.5e7, 1e16, 1e300])
sizes = Summary('interop_sizes', TRICKY_HELP, ['tricky'])

SPECIAL = [float('nan'), float('inf'), float('-inf'), -0.0, 5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, 0.1, -1e-300, 123456789.125]


def worker(index):
    for j, t in enumerate(TRICKY):
        requests.labels('GET' if j % 2 else 'POST', t[::-1], t).inc(j + index + 0.5)
    plain_total.inc(index + 1)
    unicode_name.inc(0.25)
    for k, (mode, gauge) in enumerate(gauges.items()):
        for j, t in enumerate(TRICKY):
            child = gauge.labels(t)
            if mode.endswith('mostrecent'):
                child.set(SPECIAL[(j + index + k) % len(SPECIAL)])
            else:
                child.set(j * 10 + index)
                child.inc(0.5)
                child.dec(0.125)
        if index == 0 and not mode.endswith('mostrecent'):
            for j, value in enumerate(SPECIAL):
                gauge.labels(f'special {j}').set(value)
    for j, t in enumerate(TRICKY):
        for v in (0.001, 0.3, 7.0, 1e9):
            latency.labels(t).observe(v * (index + 1) + j)
        sizes.labels(t).observe(j - index)
        sizes.labels(t).observe(1e-9)
    for v in (0.0, 1e-6, 0.1, 0.2, 3.0, 1e6, 1.2e7, 1e17, float('inf')):
        custom.observe(v)
    if index == 1:
        # Created in the child only, enough series to grow its files past 64 KiB.
        many = Counter('interop_many', 'Many series', ['series', 'tricky'])
        for n in range(1200):
            many.labels(str(n), TRICKY[n % len(TRICKY)]).inc(n)


def main():
    ctx = multiprocessing.get_context('fork')
    procs = [ctx.Process(target=worker, args=(i,)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f'worker {p.pid} failed with {p.exitcode}')
    json.dump({
        'parent_pid': os.getpid(),
        'child_pids': [p.pid for p in procs],
        'tricky': TRICKY,
        'tricky_help': TRICKY_HELP,
        'files': dump_dir(os.environ['PROMETHEUS_MULTIPROC_DIR']),
    }, sys.stdout)


if __name__ == '__main__':
    main()
