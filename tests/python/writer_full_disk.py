"""Adds series until a file system fills, as a worker on a small tmpfs does.

Run with PROMETHEUS_MULTIPROC_DIR set (and MULTIPROM_INSTALL=writer for
multiprom's writer). Makes one metric of every kind (so every kind of file
exists), then counter series with long label values until `SERIES` are made
or adding one fails; prints the number made and how it ended: `done`, or
`OSError <errno>`.
"""

import sys

from prometheus_client import Counter, Gauge, Histogram, Summary

SERIES = int(sys.argv[1])

Counter('requests', 'Requests.').inc()
for mode in ('all', 'liveall', 'min', 'livemin', 'max', 'livemax', 'sum', 'livesum',
             'mostrecent', 'livemostrecent'):
    Gauge(f'gauge_{mode}', 'A gauge.', multiprocess_mode=mode).set(1)
Histogram('latency_seconds', 'Latency.').observe(0.3)
Summary('size_bytes', 'Size.').observe(3)

paths = Counter('paths', 'Requests by path.', ['path'])
made = 0
ending = 'done'
try:
    for made in range(1, SERIES + 1):
        paths.labels('/' + 'x' * 100 + str(made)).inc()
except OSError as error:
    made -= 1
    ending = f'OSError {error.errno}'
print(made, ending)
