"""Real worker processes write families whose files disagree, for
tests/integration/collector_conflicts.rs; then the parent prints Python's
generate_latest of MultiProcessCollector.merge(glob(DIR/*.db)), as
MultiProcessCollector.collect() does.

usage: collector_conflicts.py help-and-mode|type   (PROMETHEUS_MULTIPROC_DIR set)

help-and-mode: `jobs` (counter) written with help "First." by id 1 and
"Second." by id 2; `temp` (gauge) written in mode max by id 1, min by id 2,
sum by id 3; `lat` (histogram) with help "H1." by id 3 and "H2." by id 1.
type: `x` is a counter in id 1 and a gauge (all) in id 2; `y` a gauge (sum)
in id 1 and a summary in id 2.
"""

import glob
import os
import sys

from prometheus_client import Counter, Gauge, Histogram, Summary, values
from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector


def in_process(ident, body):
    pid = os.fork()
    if pid == 0:
        try:
            values.ValueClass = values.MultiProcessValue(lambda: ident)
            body()
            os._exit(0)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status


def help_and_mode():
    in_process('1', lambda: (
        Counter('jobs', 'First.', registry=None).inc(1),
        Gauge('temp', 'Temperature.', multiprocess_mode='max', registry=None).set(5),
        Histogram('lat', 'H2.', buckets=[1], registry=None).observe(0.5),
    ))
    in_process('2', lambda: (
        Counter('jobs', 'Second.', registry=None).inc(2),
        Gauge('temp', 'Temperature.', multiprocess_mode='min', registry=None).set(7),
    ))
    in_process('3', lambda: (
        Gauge('temp', 'Temperature.', multiprocess_mode='sum', registry=None).set(11),
        Histogram('lat', 'H1.', buckets=[1], registry=None).observe(2),
    ))


def type_conflict():
    in_process('1', lambda: (
        Counter('x', 'Counter x.', registry=None).inc(1),
        Gauge('y', 'Gauge y.', multiprocess_mode='sum', registry=None).set(3),
    ))
    in_process('2', lambda: (
        Gauge('x', 'Gauge x.', registry=None).set(10),
        Summary('y', 'Summary y.', registry=None).observe(4),
    ))


class Merged:
    def __init__(self, files):
        self.files = files

    def collect(self):
        return MultiProcessCollector.merge(self.files)


if __name__ == '__main__':
    {'help-and-mode': help_and_mode, 'type': type_conflict}[sys.argv[1]]()
    files = glob.glob(os.path.join(os.environ['PROMETHEUS_MULTIPROC_DIR'], '*.db'))
    sys.stdout.write(generate_latest(Merged(files)).decode())
