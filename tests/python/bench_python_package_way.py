"""One way of adopting multiprom (docs/python.md), timed in a process of its
own, for bench_python_package.py: warm scrapes of prometheus_client's
multiprocess recipe (a new registry and collector per request, then
`generate_latest` of it) on DIR.

usage: bench_python_package_way.py WAY DIR REFERENCE REPEAT

WAY is `in-code` (the application makes `multiprom.MultiProcessCollector`
itself, `generate_latest` imported before, no `install()`) or `installed`
(`multiprom.install()` first, then the recipe unchanged, with
`prometheus_client.multiprocess.MultiProcessCollector`). The output must be
the bytes in the file REFERENCE (Python's), else it exits non-zero. Prints
`{"best": seconds, "median": seconds}`.
"""

import json
import os
import statistics
import sys
import time

way, directory, reference, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
os.environ['PROMETHEUS_MULTIPROC_DIR'] = directory

if way == 'installed':
    import multiprom

    multiprom.install()

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

if way == 'in-code':
    import multiprom

    collector_class = multiprom.MultiProcessCollector
elif way == 'installed':
    from prometheus_client.multiprocess import MultiProcessCollector as collector_class
else:
    sys.exit(f'unknown way {way!r}')
if collector_class.__module__ != 'multiprom':
    sys.exit(f'{way}: the collector is {collector_class.__module__}\'s')


def scrape():
    registry = CollectorRegistry()
    collector_class(registry)
    return generate_latest(registry)


with open(reference, 'rb') as f:
    if scrape() != f.read():
        sys.exit(f'{way}: output differs from Python\'s')
# Warm-up, unmeasured: the engine's first collection reads every file, its
# second sets the directory watch and maps them.
scrape()
times = []
for _ in range(repeat):
    start = time.perf_counter()
    scrape()
    times.append(time.perf_counter() - start)
print(json.dumps({'best': min(times), 'median': statistics.median(times)}))
