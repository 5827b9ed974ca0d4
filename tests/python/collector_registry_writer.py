"""Two real worker processes (ids 11 and 12) write every metric type for
tests/integration/collector_registry.rs (the prometheus-client adapter).

usage: collector_registry_writer.py   (PROMETHEUS_MULTIPROC_DIR must be set)
"""

import os

from prometheus_client import Counter, Gauge, Histogram, Summary, values


def worker(ident, index):
    values.ValueClass = values.MultiProcessValue(lambda: ident)
    jobs = Counter('jobs', 'Jobs "done"\nall', ['queue'])
    temp = Gauge('temp', 'Temp.', ['w'])
    busy = Gauge('busy', 'Busy.', multiprocess_mode='livesum')
    wait = Histogram('wait.seconds', 'Wait.', buckets=[0.5, 1e6])
    size = Summary('size', 'Size.')
    jobs.labels('a"b\\c\nd').inc(index + 1)
    temp.labels('x').set(1.5)
    busy.set(1)
    wait.observe(0.25 if index == 0 else 2e6)
    size.observe(3 + index)


if __name__ == '__main__':
    for index, ident in enumerate(['11', '12']):
        pid = os.fork()
        if pid == 0:
            try:
                worker(ident, index)
                os._exit(0)
            except BaseException:
                import traceback
                traceback.print_exc()
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
