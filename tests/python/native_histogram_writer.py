"""Real prometheus_client histograms writing a multiprocess directory, with
or without multiprom's native histograms
(tests/integration/python_native_histograms.rs).

usage: native_histogram_writer.py write DIR VALUE_CLASS NATIVE
       native_histogram_writer.py fork DIR VALUE_CLASS
       native_histogram_writer.py collect DIR

`write`: VALUE_CLASS is `python` (prometheus_client's own multiprocess
value class) or `multiprom` (multiprom's writer, `install(writer=True)`);
NATIVE is `off`, `early` (`install(native_histograms=True)` before
prometheus_client is imported), `late` (after the metrics are made) or
`env` (the caller set MULTIPROM_INSTALL). Always the same observations, so
runs can be compared: `time()` reads a fake clock that advances 0.25 s a
call. Prints the pid (the file names' identifier) as JSON.

`fork`: a histogram observed 1.0 in the parent, 2.0 twice in a forked
child, then 3.0 in the parent (VALUE_CLASS as for `write`); prints both
pids.

`collect`: prometheus_client's own MultiProcessCollector over DIR, as
generate_latest prints it.
"""

import json
import os
import sys


def fake_clock():
    import prometheus_client.context_managers as context_managers

    ticks = iter(range(10 ** 6))
    context_managers.default_timer = lambda: next(ticks) * 0.25


def write(value_class, native):
    import multiprom

    if native == 'early' or value_class == 'multiprom':
        multiprom.install(collector=False, writer=value_class == 'multiprom',
                          native_histograms=native == 'early')
    from prometheus_client import Counter, Histogram

    fake_clock()
    latency = Histogram('latency_seconds', 'Latency.')
    requests = Histogram('request_seconds', 'Requests.', ['route'])
    route_a = requests.labels('/a')
    jobs = Histogram('job_seconds', 'Jobs.')
    payload = multiprom.NativeHistogram('payload_bytes', 'Payload.', ['kind'])
    served = Counter('served', 'Served.')
    if native == 'late':
        multiprom.install(collector=False, native_histograms=True)
    for value in (0.5, 1.0, 2.0, 3.0, 0.0):
        latency.observe(value)
    route_a.observe(0.25)
    requests.labels(route='/a').observe(0.25)
    requests.labels('/b').observe(4.0)
    with jobs.time():
        pass

    @jobs.time()
    def job():
        pass

    job()
    job()
    payload.labels('x').observe(1024)
    payload.labels('x').observe(100)
    with payload.labels('y').time():
        pass
    served.inc(3)
    print(json.dumps({'pid': os.getpid()}))


def fork(value_class):
    import multiprom

    multiprom.install(collector=False, writer=value_class == 'multiprom',
                      native_histograms=True)
    from prometheus_client import Histogram

    latency = Histogram('latency_seconds', 'Latency.')
    latency.observe(1.0)
    child = os.fork()
    if child == 0:
        latency.observe(2.0)
        latency.observe(2.0)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    if status != 0:
        sys.exit(f'child failed: {status}')
    latency.observe(3.0)
    print(json.dumps({'parent': os.getpid(), 'child': child}))


def collect(directory):
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    sys.stdout.write(generate_latest(registry).decode())


def main():
    command, directory = sys.argv[1], sys.argv[2]
    if command == 'collect':
        collect(directory)
        return
    os.environ['PROMETHEUS_MULTIPROC_DIR'] = directory
    if command == 'write':
        write(sys.argv[3], sys.argv[4])
    elif command == 'fork':
        fork(sys.argv[3])
    else:
        sys.exit(f'unknown command {command!r}')


if __name__ == '__main__':
    main()
