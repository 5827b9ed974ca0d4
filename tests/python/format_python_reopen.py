"""A Python worker with a fixed process identifier opens (or creates) its files,
reports the values it finds, updates them, and reports the values after.

usage: format_python_reopen.py ID STEP   (PROMETHEUS_MULTIPROC_DIR must be set)

The metrics are mirrored in tests/integration/format_interop.rs (`reopen`):
keep the two in step. Prints JSON {"before": {...}, "after": {...}}.
"""

import json
import sys

from prometheus_client import values

process_id, step = sys.argv[1], int(sys.argv[2])
# Must be in place before any metric is created.
values.ValueClass = values.MultiProcessValue(lambda: process_id)

from prometheus_client import Counter, Gauge, Histogram, Summary  # noqa: E402

from format_common import TRICKY_HELP  # noqa: E402

PATHS = ['/a', '/\u00fc\U0001F600\n"q"']

requests = Counter('reopen_requests', TRICKY_HELP, ['path'])
inflight = Gauge('reopen_inflight', 'In flight', ['path'], multiprocess_mode='livesum')
last = Gauge('reopen_last', 'Last seen', multiprocess_mode='mostrecent')
latency = Histogram('reopen_latency', 'Latency "s"', buckets=[0.5, 1.0])
size = Summary('reopen_size', 'Size')


def snapshot():
    out = {}
    for path in PATHS + [f'/step{step}']:
        out[f'requests{path}'] = requests.labels(path)._value.get()
    out['inflight/a'] = inflight.labels('/a')._value.get()
    out['last'] = last._value.get()
    out['latency_sum'] = latency._sum.get()
    for i, bucket in enumerate(latency._buckets):
        out[f'latency_bucket{i}'] = bucket.get()
    out['size_count'] = size._count.get()
    out['size_sum'] = size._sum.get()
    return out


def main():
    # Touch existing series first so that `before` only creates the new one last.
    before = snapshot()
    requests.labels(PATHS[0]).inc(1)
    requests.labels(PATHS[1]).inc(2)
    requests.labels(f'/step{step}').inc(3)
    inflight.labels('/a').inc(1)
    last.set(100 + step)
    latency.observe(0.7)
    size.observe(2)
    json.dump({'before': before, 'after': snapshot()}, sys.stdout)


if __name__ == '__main__':
    main()
