"""Two real worker processes write a small directory for tests/integration/scrape.rs;
then the parent prints, as JSON, what Python's collector makes of it:
{"prom": ..., "om": ..., "prom_noacc": ...}.

usage: collector_scrape_writer.py   (PROMETHEUS_MULTIPROC_DIR must be set)
"""

import glob
import json
import multiprocessing
import os
import sys

from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import generate_latest as generate_latest_om

from prometheus_client import Counter, Gauge, Histogram

jobs = Counter('jobs', 'Jobs done.', ['queue'])
busy = Gauge('busy', 'Busy workers.', multiprocess_mode='livesum')
wait = Histogram('wait_seconds', 'Time waited.', buckets=[1.0])


def worker(index):
    jobs.labels('a"b').inc(index + 1)
    busy.set(1)
    wait.observe(0.5 if index == 0 else 2.0)


if __name__ == '__main__':
    ctx = multiprocessing.get_context('fork')
    for index in range(2):
        p = ctx.Process(target=worker, args=(index,))
        p.start()
        p.join()
        assert p.exitcode == 0

    files = glob.glob(os.path.join(os.environ['PROMETHEUS_MULTIPROC_DIR'], '*.db'))

    class Merged:
        def __init__(self, accumulate):
            self.accumulate = accumulate

        def collect(self):
            return MultiProcessCollector.merge(files, accumulate=self.accumulate)

    json.dump({
        'prom': generate_latest(Merged(True)).decode(),
        'om': generate_latest_om(Merged(True)).decode(),
        'prom_noacc': generate_latest(Merged(False)).decode(),
    }, sys.stdout)
