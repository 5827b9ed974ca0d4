"""multiprom's value class writes the files prometheus_client's writes, byte
for byte (tests/integration/python_package.rs).

usage: python_writer_identity.py WORKDIR

Each scenario runs twice through prometheus_client's public API (Counter,
Gauge, Histogram, Summary; a few through the value class itself), once
with ``prometheus_client.values.MultiProcessValue``'s class and once with
``multiprom.MultiProcessValue``'s, each in a directory of its own under
WORKDIR; then the two directories must hold the same file names and the
same bytes, and the values read back with ``get()`` must be equal.
Most-recent gauges take their timestamps from a fake clock, the same for
both runs. A forked child's pid differs between the runs, so it is named
``CHILD`` when the names are compared.

Prints one line per scenario and exits non-zero at the first difference.
"""

import os
import sys

import prometheus_client.metrics as metrics_module
from prometheus_client import Counter, Gauge, Histogram, Summary, values

import multiprom

PYTHON = values.MultiProcessValue
MULTIPROM = multiprom.MultiProcessValue
GAUGE_MODES = ('all', 'liveall', 'min', 'livemin', 'max', 'livemax', 'sum', 'livesum',
               'mostrecent', 'livemostrecent')


class FakeClock:
    """``time`` for prometheus_client.metrics: the same timestamps for both
    runs."""

    def __init__(self):
        self.now = 1_700_000_000.0

    def time(self):
        self.now += 0.125
        return self.now

    def __getattr__(self, name):
        import time
        return getattr(time, name)


def counters(factory, got):
    values.ValueClass = factory(lambda: 11)
    plain = Counter('plain', 'A plain counter.', registry=None)
    labelled = Counter('req', 'Requests "quoted" \\ and ünïcode.', ['method', 'path'], registry=None)
    plain.inc()
    plain.inc(2.5)
    for i in range(20):
        labelled.labels('GET' if i % 3 else 'POST', f'/p/{i % 7}/é"\\').inc(i / 3)
    ns = Counter('c', 'h', namespace='ns', subsystem='ss', unit='seconds', registry=None)
    ns.inc(1e-9)
    # A path decoded with 'surrogateescape' (bytes that are not UTF-8): a
    # lone surrogate, which the key's JSON escapes.
    undecodable = b'/caf\xe9'.decode('utf-8', 'surrogateescape')
    labelled.labels('GET', undecodable).inc()
    Counter('raw_path', f'Help {undecodable}.', registry=None).inc()
    got += [plain._value.get(), ns._value.get()]


def gauges(factory, got):
    values.ValueClass = factory(lambda: 12)
    for mode in GAUGE_MODES:
        g = Gauge(f'g_{mode}', f'Gauge {mode}.', ['x'], registry=None, multiprocess_mode=mode)
        for i in range(4):
            child = g.labels(str(i))
            if mode in ('mostrecent', 'livemostrecent'):
                child.set(i * 1.5)
                child.set(-i)
            else:
                child.inc(i)
                child.dec(0.25)
                child.set(i * 2.0 + 0.5)
                child.inc(1)
            got.append(child._value.get())
    # The value class itself: explicit timestamps, falsy ones written 0.0,
    # and inc after a timestamped set writes timestamp 0.0.
    raw = values.ValueClass('gauge', 'raw', 'raw', ('k',), ('v',), 'Raw.',
                            multiprocess_mode='mostrecent')
    raw.set(1.0, timestamp=123.5)
    raw.set(2.0, timestamp=0)
    raw.set(3.0, timestamp=456.25)
    other = values.ValueClass('gauge', 'raw2', 'raw2', (), (), '', multiprocess_mode='livesum')
    other.set(4.0, timestamp=789.0)
    other.inc(1.0)
    got += [raw.get(), other.get()]


def histograms_and_summaries(factory, got):
    values.ValueClass = factory(lambda: 13)
    h = Histogram('lat', 'Latency.', ['route'], registry=None, buckets=(0.1, 0.5, 1, 2.5, float('inf')))
    s = Summary('size', 'Size.', ['kind'], registry=None)
    plain = Histogram('plain_h', 'Default buckets.', registry=None)
    for i in range(30):
        h.labels(f'/r{i % 4}').observe(i / 10)
        s.labels('a' if i % 2 else 'b').observe(i * 3)
        plain.observe(i / 7)
    got += [plain._sum.get(), h.labels('/r0')._sum.get()]


def growth(factory, got):
    # Entries of ~100 bytes: 64 KiB, then 128 KiB, then 256 KiB.
    values.ValueClass = factory(lambda: 14)
    c = Counter('grow', 'Growing past the first 64 KiB.', ['i'], registry=None)
    for i in range(2500):
        c.labels(f'label-value-{i:06d}').inc(i)
    first = c.labels('label-value-000001')
    first.inc(5)
    got.append(first._value.get())


def adopted(factory, got):
    # A file left by an earlier process with the same pid (written by
    # prometheus_client), and a 0-byte one left by a writer killed at birth.
    directory = os.environ['PROMETHEUS_MULTIPROC_DIR']
    values.ValueClass = PYTHON(lambda: 15)
    old = Counter('old', 'From before.', ['n'], registry=None)
    for n in range(5):
        old.labels(str(n)).inc(n + 1)
    g = Gauge('oldg', 'From before.', registry=None, multiprocess_mode='mostrecent')
    g.set(9)
    values.close_all_multiprocess_files()
    open(os.path.join(directory, 'summary_15.db'), 'wb').close()
    values.ValueClass = factory(lambda: 15)
    again = Counter('old', 'From before.', ['n'], registry=None)
    again.labels('2').inc(10)
    again.labels('7').inc(1)
    g2 = Gauge('oldg', 'From before.', registry=None, multiprocess_mode='mostrecent')
    got.append(g2._value.get())
    g2.set(10)
    s = Summary('fresh', 'Into the 0-byte file.', registry=None)
    s.observe(4)
    got += [again.labels('2')._value.get(), again.labels('7')._value.get()]


def changing_identifier(factory, got):
    pid = [100]
    values.ValueClass = factory(lambda: pid[0])
    c = Counter('moves', 'Across identifiers.', ['n'], registry=None)
    g = Gauge('level', 'Across identifiers.', registry=None, multiprocess_mode='all')
    c.labels('a').inc(1)
    g.set(3)
    pid[0] = 101
    # Every value is re-created, in creation order, in 101's files.
    c.labels('b').inc(2)
    got.append(c.labels('a')._value.get())
    h = Histogram('late', 'Made under 101.', registry=None, buckets=(1, 2))
    h.observe(1.5)
    pid[0] = 100
    # Back to 100: its files are continued.
    got.append(c.labels('a')._value.get())
    c.labels('a').inc(4)
    g.inc(1)
    got += [c.labels('a')._value.get(), g._value.get()]


def forked(factory, got):
    values.ValueClass = factory()
    c = Counter('forked', 'Across a fork.', ['who'], registry=None)
    g = Gauge('forked_g', 'Across a fork.', registry=None, multiprocess_mode='livesum')
    c.labels('parent').inc(3)
    g.inc(2)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(read)
            # The first operation in the child re-creates every entry in
            # the child's files.
            c.labels('child').inc(5)
            g.inc(1)
            late = Summary('child_only', 'Made in the child.', registry=None)
            late.observe(2)
            os.write(write, repr((c.labels('parent')._value.get(), g._value.get())).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        got.append(pipe.read())
    _, status = os.waitpid(child, 0)
    if status != 0:
        sys.exit(f'forked child failed: {status}')
    c.labels('parent').inc(1)
    got += [c.labels('parent')._value.get(), g._value.get(), str(child)]


SCENARIOS = [counters, gauges, histograms_and_summaries, growth, adopted, changing_identifier,
             forked]


def snapshot(directory, child):
    files = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), 'rb') as f:
            data = f.read()
        if child:
            name = name.replace(child, 'CHILD')
        files[name] = data
    return files


def main():
    work = sys.argv[1]
    for scenario in SCENARIOS:
        results = {}
        for side, factory in (('python', PYTHON), ('multiprom', MULTIPROM)):
            directory = os.path.join(work, scenario.__name__, side)
            os.makedirs(directory)
            os.environ['PROMETHEUS_MULTIPROC_DIR'] = directory
            metrics_module.time = FakeClock()
            got = []
            try:
                scenario(factory, got)
            finally:
                values.close_all_multiprocess_files()
            child = got.pop() if scenario is forked else None
            results[side] = (snapshot(directory, child), got)
        (py_files, py_got), (mp_files, mp_got) = results['python'], results['multiprom']
        if sorted(py_files) != sorted(mp_files):
            sys.exit(f'{scenario.__name__}: files differ: python {sorted(py_files)}, '
                     f'multiprom {sorted(mp_files)}')
        for name, data in py_files.items():
            if data != mp_files[name]:
                at = next(i for i, (a, b) in enumerate(zip(data, mp_files[name])) if a != b) \
                    if len(data) == len(mp_files[name]) else 'length'
                sys.exit(f'{scenario.__name__}: {name} differs (first difference at byte {at}; '
                         f'{len(data)} vs {len(mp_files[name])} bytes)')
        if py_got != mp_got:
            sys.exit(f'{scenario.__name__}: get() differs: python {py_got}, multiprom {mp_got}')
        sizes = ', '.join(f'{name} {len(data)}' for name, data in py_files.items())
        print(f'{scenario.__name__}: {len(py_files)} files equal ({sizes}); get() equal')


if __name__ == '__main__':
    main()
