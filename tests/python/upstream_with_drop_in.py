"""prometheus_client's own tests/test_multiprocess.py, run with multiprom's
drop-in installed (tests/integration/python_package.rs).

usage: upstream_with_drop_in.py SDIST SHA256 WORKDIR [--writer]

SDIST is prometheus_client's source distribution as the package registry
serves it (fetched by the Rust side with `pip download --no-binary :all:`);
its SHA-256 must be SHA256. The test module is extracted from it into
WORKDIR (never kept in this repository), `multiprom.install()` runs before
the module is imported, so the `MultiProcessCollector` the module imports is
multiprom's, and every test in it runs with unittest. With `--writer`,
`multiprom.install(writer=True)`: the `MultiProcessValue` the module imports
from `prometheus_client.values` (and every value class its tests make) is
multiprom's too.

Prints one JSON object: the collector class and value factory the module
got, the tests by outcome, how often multiprom's collect() and merge() ran
and how many values multiprom's value classes made. Exits 0 even
if tests fail: the Rust side judges.
"""

import hashlib
import importlib.util
import json
import os
import sys
import tarfile
import unittest

import functools

import multiprom
from multiprom import _values, _writer_install

# Count the values multiprom's value classes make, to show the tests use
# them: every class install(writer=True) hands out counts in its __new__.
calls = {'collect': 0, 'merge': 0, 'values': 0}


@functools.wraps(_values.MultiProcessValue)
def counting_factory(*args, **kwargs):
    cls = _values.MultiProcessValue(*args, **kwargs)
    real_new = cls.__new__

    def counting_new(cls, *args, **kwargs):
        calls['values'] += 1
        return real_new(cls, *args, **kwargs)

    cls.__new__ = staticmethod(counting_new)
    return cls


_writer_install.MultiProcessValue = counting_factory
writer = sys.argv[4:] == ['--writer']
multiprom.install(writer=writer)

sdist, sha256, workdir = sys.argv[1:4]
with open(sdist, 'rb') as f:
    digest = hashlib.sha256(f.read()).hexdigest()
if digest != sha256:
    sys.exit(f'{sdist}: SHA-256 {digest}, expected {sha256}')
with tarfile.open(sdist) as tar:
    members = [m for m in tar.getmembers() if m.name.endswith('/tests/test_multiprocess.py')]
    if len(members) != 1:
        sys.exit(f'{sdist} has no tests/test_multiprocess.py: {[m.name for m in members]}')
    source = tar.extractfile(members[0]).read()
path = os.path.join(workdir, 'test_multiprocess.py')
with open(path, 'wb') as f:
    f.write(source)

# Count the drop-in's work, to show the tests exercise it.
real_collect = multiprom.MultiProcessCollector.collect
real_merge = multiprom.MultiProcessCollector.merge


def counting_collect(self):
    calls['collect'] += 1
    return real_collect(self)


def counting_merge(files, accumulate=True):
    calls['merge'] += 1
    return real_merge(files, accumulate)


multiprom.MultiProcessCollector.collect = counting_collect
multiprom.MultiProcessCollector.merge = staticmethod(counting_merge)

spec = importlib.util.spec_from_file_location('test_multiprocess', path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
collector = module.MultiProcessCollector
# The factory the module imported (unwrapped from the counting one).
value_factory = getattr(module.MultiProcessValue, '__wrapped__', module.MultiProcessValue)


class Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test)


def name(test):
    return f'{type(test).__name__}.{test._testMethodName}'


suite = unittest.TestLoader().loadTestsFromModule(module)
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Result).run(suite)
json.dump({
    'collector': f'{collector.__module__}.{collector.__qualname__}',
    'value_factory': f'{value_factory.__module__}.{value_factory.__qualname__}',
    'passed': sorted(name(t) for t in result.passed),
    'failed': sorted(f'{name(t)}: {tb}' for t, tb in result.failures),
    'errors': sorted(f'{name(t)}: {tb}' for t, tb in result.errors),
    'skipped': sorted(f'{name(t)}: {why}' for t, why in result.skipped),
    'unexpected_successes': sorted(name(t) for t in result.unexpectedSuccesses),
    'expected_failures': sorted(name(t) for t, _ in result.expectedFailures),
    'calls': calls,
}, sys.stdout)
