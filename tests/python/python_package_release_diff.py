"""The multiprom package with an older prometheus_client than the pinned one,
on random directories (tests/integration/python_package_releases.rs).

usage: python_package_release_diff.py BASE FIRST_SEED COUNT

BASE holds what `collector_diff.py BASE FIRST_SEED COUNT` made with the
pinned prometheus_client: per seed a directory and that release's outputs.
This interpreter has an older release and the package. The package prints
the pinned release's bytes whatever release is installed, because what
older releases print differently there are defects they fixed later: from
0.24 a histogram series' samples are together (before, every series' `_sum`
came first, which OpenMetrics parsers reject), and from 0.26 an exponent of
10 or more has no leading zero (`1e+10`, not `1e+010`). Only OpenMetrics
sample names follow the installed release (before 0.23 it keeps a `:`). Per
seed:

* the engine-encoded `generate_latest` (a registry holding only multiprom's
  collector) is taken and prints the pinned release's Prometheus text;
* the engine-encoded OpenMetrics is taken and is the pinned release's;
  where the installed release keeps a `:` in sample names (before 0.23),
  what the pinned release writes with `escaping=allow-utf-8`, which keeps
  it too;
* where the installed release has escaping schemes (0.23 on), text and
  OpenMetrics with each are the pinned release's;
* `collect()` gives the installed release's own merge's families, each
  with the same samples (a bound of 1e10 or more written as the pinned
  release writes it); in the same order from 0.24 on.

A seed whose names the installed release cannot represent (its own merge
raises) is counted, not compared; so are the seeds whose collect() orders
samples or writes bounds otherwise than the release, and those where the
release's own merge and encoder print other bytes than the pinned release. Prints one line per
failure and exits 1 if any, else the counts.
"""

import inspect
import logging
import os
import sys
from importlib.metadata import version

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector as PythonCollector
from prometheus_client.openmetrics.exposition import generate_latest as generate_latest_om

import multiprom
from multiprom import _exposition

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collector_diff import ESCAPINGS, reference_files  # noqa: E402
from python_package_diff import Fixed, describe  # noqa: E402

_exposition.set_wanted(True)
PYTHON_PROM, PYTHON_OM = generate_latest.__wrapped__, generate_latest_om.__wrapped__
RELEASE = tuple(int(part) for part in version('prometheus_client').split('.')[:2])
# From 0.24 the release's merge keeps a series' samples together.
SAME_ORDER = RELEASE >= (0, 24)


class Colon:
    def collect(self):
        yield GaugeMetricFamily('a:b', 'A.', value=1)


# Whether the release has escaping schemes (0.23 on).
ESCAPING = 'escaping' in inspect.signature(generate_latest).parameters
# Whether the release's OpenMetrics writes a sample name's `:` as `_`.
OM_UNDERSCORES = b'\na_b 1.0\n' in PYTHON_OM(Colon())


def normalized(families, order=True):
    """Each family's samples, a bucket's `le` as the number it names (the
    merge writes it anew; before 0.26, a bound of 1e10 or more as `1e+010`);
    in their order, or in one order."""
    def sample(described):
        bucket = described[1].endswith('_bucket')
        labels = [(name, repr(float(value)) if bucket and name == 'le' else value)
                  for name, value in described[2]]
        return repr(described[:2] + (labels,) + described[3:])
    return [(family[:6], [sample(s) for s in family[6]] if order
             else sorted(sample(s) for s in family[6])) for family in families]


def check_seed(base, seed, counts):
    directory = os.path.join(base, f'seed-{seed}')
    ref = os.path.join(base, f'seed-{seed}.ref')
    failures = []
    try:
        merged = PythonCollector.merge(reference_files(directory))
    except ValueError:  # names this release's Metric refuses
        counts['not representable'] += 1
        return failures
    theirs = describe(merged)
    registry = CollectorRegistry()
    collector = multiprom.MultiProcessCollector(registry, path=directory)
    ours = describe(collector.collect())
    if normalized(ours, order=False) != normalized(theirs, order=False):
        failures.append(f'seed {seed}: collect() holds other samples than the release merges')
    elif normalized(ours) != normalized(theirs):
        if SAME_ORDER:
            failures.append(f'seed {seed}: collect() orders samples otherwise than the release')
        counts['samples in another order'] += 1
    if ours != theirs and normalized(ours) == normalized(theirs):
        counts['bounds written otherwise'] += 1
    if _exposition._expose(registry, openmetrics=False) is None:
        failures.append(f'seed {seed}: the engine-encoded exposition was not taken')
    with open(os.path.join(ref, 'prom.txt'), 'rb') as f:
        pinned = f.read()
    if generate_latest(registry) != pinned:
        failures.append(f'seed {seed}: the text is not the pinned release\'s')
    if PYTHON_PROM(Fixed(merged)) != pinned:
        counts['the release prints otherwise'] += 1
    # A release that keeps a `:` in OpenMetrics sample names gets them as
    # the pinned release writes them with allow-utf-8.
    with open(os.path.join(ref, 'om.txt' if OM_UNDERSCORES else 'om_allow-utf-8.txt'), 'rb') as f:
        want = f.read()
    if _exposition._expose(registry, openmetrics=True) is None:
        failures.append(f'seed {seed}: the engine-encoded OpenMetrics was not taken')
    if generate_latest_om(registry) != want:
        failures.append(f'seed {seed}: OpenMetrics is not what it should be')
    if ESCAPING:
        for escaping in ESCAPINGS:
            for name, encode in ((f'prom_{escaping}.txt', generate_latest),
                                 (f'om_{escaping}.txt', generate_latest_om)):
                with open(os.path.join(ref, name), 'rb') as f:
                    if encode(registry, escaping) != f.read():
                        failures.append(f'seed {seed}: {name} is not the pinned release\'s')
    counts['compared'] += 1
    return failures


def main():
    base, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    logging.getLogger('multiprom').setLevel(logging.ERROR)
    counts = {'compared': 0, 'not representable': 0, 'samples in another order': 0,
              'bounds written otherwise': 0, 'the release prints otherwise': 0}
    failures = []
    for seed in range(first, first + count):
        failures.extend(check_seed(base, seed, counts))
    for failure in failures:
        print(failure)
    if failures:
        sys.exit(1)
    print(', '.join(f'{value} {name}' for name, value in counts.items()))


if __name__ == '__main__':
    main()
