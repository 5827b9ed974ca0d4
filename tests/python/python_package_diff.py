"""The multiprom Python package against prometheus_client on random
directories (tests/integration/python_package.rs).

usage: python_package_diff.py BASE FIRST_SEED COUNT

BASE holds what `collector_diff.py BASE FIRST_SEED COUNT` made: per seed a
directory written by real forked prometheus_client processes and Python's
reference outputs. For every seed this checks, in this interpreter (which
has both prometheus_client and multiprom installed):

* objects: `multiprom.MultiProcessCollector(...).collect()` (cold, then
  warm) and `multiprom.MultiProcessCollector.merge(files, accumulate=...)`
  against `prometheus_client.multiprocess.MultiProcessCollector.merge` of
  the same files: same classes, the same families in the same order with
  equal name, help, type, unit and gauge `_multiprocess_mode`, the same
  samples in the same order with equal fields (values compared by `repr`,
  so NaN and -0.0 count) and labels in the same key order;
* bytes: `generate_latest` of a registry holding the multiprom collector,
  Prometheus text and OpenMetrics, `accumulate` on and off, against the
  reference files, through prometheus_client's encoder and through the
  engine-encoded `generate_latest` that a multiprom collector puts in
  place, this one with each escaping scheme too.

Prints one line per failing seed and exits 1 if any failed, else prints
"N seeds equal".
"""

import logging
import os
import sys

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector as PythonCollector
from prometheus_client.openmetrics.exposition import generate_latest as generate_latest_om
from prometheus_client.samples import Sample

import multiprom
from multiprom import _exposition

# generate_latest engine-encoded where it can be, as the first multiprom
# collector (or install()) makes it; `__wrapped__` is prometheus_client's own.
_exposition.set_wanted(True)
ENGINE_PROM, ENGINE_OM = generate_latest, generate_latest_om
PYTHON_PROM, PYTHON_OM = generate_latest.__wrapped__, generate_latest_om.__wrapped__

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collector_diff import ESCAPINGS, reference_files  # noqa: E402


def engine_encoded(call):
    """`call()`'s bytes, and whether the engine encoded them: asked once
    (through `_exposition._expose`), it answered."""
    answers = []
    expose = _exposition._expose

    def spy(*args, **kwargs):
        text = expose(*args, **kwargs)
        answers.append(text is not None)
        return text

    _exposition._expose = spy
    try:
        return call(), answers == [True]
    finally:
        _exposition._expose = expose


class Reports(logging.Handler):
    """Files multiprom skipped (the random directories have no bad files;
    help and gauge mode conflicts are logged too, and expected)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        if record.getMessage().startswith('skipped '):
            self.records.append(record)


def describe_sample(sample, pid_last):
    labels = list(sample.labels.items())
    if pid_last:
        # The one known difference in key order: a gauge that declares its own
        # label `pid` (its value is replaced by the process's) has `pid` at
        # its sorted position in Python's dict, last in multiprom's, as for
        # every other gauge. Both orders are compared with `pid` last.
        labels = [kv for kv in labels if kv[0] != 'pid'] + [kv for kv in labels if kv[0] == 'pid']
    return (type(sample), sample.name, labels, repr(sample.value),
            sample.timestamp, sample.exemplar,
            # Releases before 0.19 have no native histogram field.
            getattr(sample, 'native_histogram', None), len(sample))


def describe(metrics):
    """Everything observable about a merge result, comparable with ==."""
    out = []
    for m in metrics:
        mode = getattr(m, '_multiprocess_mode', None)
        pid_last = m.type == 'gauge' and mode in ('all', 'liveall')
        out.append((type(m), m.name, m.documentation, m.type, m.unit, mode,
                    [describe_sample(s, pid_last) for s in m.samples]))
    return out


def first_difference(want, got):
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            return f'family #{i}:\n  Python:    {w!r}\n  multiprom: {g!r}'
    return f'{len(want)} families from Python, {len(got)} from multiprom'


class Fixed:
    """A collector returning given metrics (to encode a merge() result)."""

    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self):
        return self.metrics


def check_seed(base, seed, reports):
    directory = os.path.join(base, f'seed-{seed}')
    ref = os.path.join(base, f'seed-{seed}.ref')
    files = reference_files(directory)
    failures = []

    def expect_bytes(name, text):
        with open(os.path.join(ref, name), 'rb') as f:
            want = f.read()
        if want != text:
            failures.append(f'seed {seed}: {name} differs:\n--- Python\n{want!r}\n--- multiprom\n{text!r}')

    def expect_objects(what, want, got):
        want, got = describe(want), describe(got)
        if want != got:
            failures.append(f'seed {seed}: {what}: {first_difference(want, got)}')

    python = PythonCollector.merge(files, accumulate=True)
    registry = CollectorRegistry()
    collector = multiprom.MultiProcessCollector(registry, path=directory)
    for cache in ('cold', 'warm'):
        expect_objects(f'collect() ({cache})', python, collector.collect())
        expect_bytes('prom.txt', PYTHON_PROM(registry))
        expect_bytes('om.txt', PYTHON_OM(registry))
        # The engine-encoded exposition: taken for
        # this registry (not a fallback), and the same bytes.
        if _exposition._expose(registry, openmetrics=False) is None:
            failures.append(f'seed {seed}: the engine-encoded exposition was not taken')
        expect_bytes('prom.txt', ENGINE_PROM(registry))
        expect_bytes('om.txt', ENGINE_OM(registry))
        # The other escaping schemes (Prometheus 3 asks for allow-utf-8).
        for escaping in ESCAPINGS:
            for name, encode in ((f'prom_{escaping}.txt', ENGINE_PROM),
                                 (f'om_{escaping}.txt', ENGINE_OM)):
                text, engine = engine_encoded(lambda: encode(registry, escaping))
                if not engine:
                    failures.append(f'seed {seed}: {name} was not engine-encoded')
                expect_bytes(name, text)
    for accumulate, prom, om in [(True, 'prom.txt', 'om.txt'),
                                 (False, 'prom_noacc.txt', 'om_noacc.txt')]:
        ours = multiprom.MultiProcessCollector.merge(files, accumulate=accumulate)
        theirs = PythonCollector.merge(files, accumulate=accumulate)
        expect_objects(f'merge(accumulate={accumulate})', theirs, ours)
        expect_bytes(prom, PYTHON_PROM(Fixed(ours)))
        expect_bytes(om, PYTHON_OM(Fixed(ours)))
    if reports.records:
        failures.append(f'seed {seed}: multiprom skipped files: '
                        + '; '.join(r.getMessage() for r in reports.records))
        reports.records.clear()
    return failures


def main():
    base, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    reports = Reports()
    logging.getLogger('multiprom').addHandler(reports)
    logging.getLogger('multiprom').setLevel(logging.DEBUG)
    assert Metric and Sample  # the classes compared above come from here
    failures = []
    for seed in range(first, first + count):
        failures.extend(check_seed(base, seed, reports))
    for failure in failures:
        print(failure)
    if failures:
        sys.exit(1)
    print(f'{count} seeds equal')


if __name__ == '__main__':
    main()
