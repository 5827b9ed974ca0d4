"""The writing half of upstream prometheus_client tests/test_multiprocess.py.

usage: collector_upstream.py TEST_NAME   (PROMETHEUS_MULTIPROC_DIR or the
                                          legacy lowercase variable is set)

Each function below is the body of the upstream test of the same name, with
the real library writing the files exactly as upstream does (including its
`MultiProcessValue(lambda: pid)` process identifiers). Wherever upstream
asserts on merged values, the body calls `check(label)` instead: it prints
`CHECK <label>` and waits for a line on stdin, while the Rust side
(tests/integration/collector_upstream.rs) collects the directory with
multiprom and asserts what upstream asserts. `INFO <json>` lines carry facts
only Python can observe (e.g. a process-local value). `DONE` ends a run.
"""

import json
import os
import sys
import warnings

from prometheus_client import mmap_dict, values
from prometheus_client.core import Counter, Gauge, Histogram, Summary
from prometheus_client.multiprocess import mark_process_dead
from prometheus_client.values import MultiProcessValue


def check(label):
    sys.stdout.write(f'CHECK {label}\n')
    sys.stdout.flush()
    if sys.stdin.readline() == '':
        sys.exit('collector_upstream.py: the Rust side went away')


def info(**facts):
    sys.stdout.write('INFO ' + json.dumps(facts) + '\n')
    sys.stdout.flush()


def mp_dir():
    return os.environ['PROMETHEUS_MULTIPROC_DIR']


def use_pid(pid):
    values.ValueClass = MultiProcessValue(lambda: pid)


# --- TestMultiProcessDeprecation -------------------------------------------

def test_deprecation_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        values.ValueClass = values.get_value_class()
        Counter('c', 'help', registry=None).inc()
        info(uppercase_set=os.environ.get('PROMETHEUS_MULTIPROC_DIR'),
             warnings=[str(x.message) for x in w if issubclass(x.category, DeprecationWarning)])
    check('after')


def test_mark_process_dead_respects_lowercase():
    use_pid(123)
    Gauge('g', 'help', registry=None, multiprocess_mode='liveall').set(1)
    values.close_all_multiprocess_files()
    check('before')
    # Only the lowercase variable: mark_process_dead must find the directory.
    del os.environ['PROMETHEUS_MULTIPROC_DIR']
    mark_process_dead(123)
    check('after')


# --- TestMultiProcess ---------------------------------------------------------

def test_counter_adds():
    use_pid(123)
    c1 = Counter('c', 'help', registry=None)
    use_pid(456)
    c2 = Counter('c', 'help', registry=None)
    check('created')
    c1.inc(1)
    c2.inc(2)
    check('incremented')


def test_summary_adds():
    use_pid(123)
    s1 = Summary('s', 'help', registry=None)
    use_pid(456)
    s2 = Summary('s', 'help', registry=None)
    check('created')
    s1.observe(1)
    s2.observe(2)
    check('observed')


def test_histogram_adds():
    use_pid(123)
    h1 = Histogram('h', 'help', registry=None)
    use_pid(456)
    h2 = Histogram('h', 'help', registry=None)
    check('created')
    h1.observe(1)
    h2.observe(2)
    check('observed')


def gauge_pair(mode, first, second, dead_after=True):
    use_pid(123)
    g1 = Gauge('g', 'help', registry=None, multiprocess_mode=mode)
    use_pid(456)
    g2 = Gauge('g', 'help', registry=None, multiprocess_mode=mode)
    if first is not None:
        check('created')
        g1.set(first)
        g2.set(second)
    else:
        # mostrecent modes: g2 set before g1, so g1's value is the newest.
        g2.set(2)
        g1.set(1)
    check('set')
    values.close_all_multiprocess_files()
    mark_process_dead(123, mp_dir())
    check('dead')


def test_gauge_all():
    use_pid(123)
    g1 = Gauge('g', 'help', registry=None)
    use_pid(456)
    g2 = Gauge('g', 'help', registry=None)
    check('created')
    g1.set(1)
    g2.set(2)
    mark_process_dead(123)
    check('dead')


def test_gauge_liveall():
    gauge_pair('liveall', 1, 2)


def test_gauge_min():
    use_pid(123)
    g1 = Gauge('g', 'help', registry=None, multiprocess_mode='min')
    use_pid(456)
    g2 = Gauge('g', 'help', registry=None, multiprocess_mode='min')
    check('created')
    g1.set(1)
    g2.set(2)
    check('set')


def test_gauge_livemin():
    gauge_pair('livemin', 1, 2)


def test_gauge_max():
    use_pid(123)
    g1 = Gauge('g', 'help', registry=None, multiprocess_mode='max')
    use_pid(456)
    g2 = Gauge('g', 'help', registry=None, multiprocess_mode='max')
    check('created')
    g1.set(1)
    g2.set(2)
    check('set')


def test_gauge_livemax():
    gauge_pair('livemax', 2, 1)


def test_gauge_sum():
    gauge_pair('sum', 1, 2)


def test_gauge_livesum():
    gauge_pair('livesum', 1, 2)


def test_gauge_mostrecent():
    gauge_pair('mostrecent', None, None)


def test_gauge_livemostrecent():
    gauge_pair('livemostrecent', None, None)


def test_namespace_subsystem():
    use_pid(123)
    c1 = Counter('c', 'help', registry=None, namespace='ns', subsystem='ss')
    c1.inc(1)
    check('incremented')


def test_counter_across_forks():
    pid = 0
    values.ValueClass = MultiProcessValue(lambda: pid)
    c1 = Counter('c', 'help', registry=None)
    check('created')
    c1.inc(1)
    c1.inc(1)
    pid = 1
    c1.inc(1)
    info(local_value=c1._value.get())
    check('forked')


def test_initialization_detects_pid_change():
    pid = 0
    values.ValueClass = MultiProcessValue(lambda: pid)
    Counter('c1', 'c1', registry=None)
    check('c1')
    Counter('c2', 'c2', registry=None)
    check('c2')
    pid = 1
    Counter('c3', 'c3', registry=None)
    check('c3')


ABCD = {i: i for i in 'abcd'}


def test_collect():
    pid = 0
    values.ValueClass = MultiProcessValue(lambda: pid)
    c = Counter('c', 'help', labelnames=ABCD.keys(), registry=None)
    g = Gauge('g', 'help', labelnames=ABCD.keys(), registry=None)
    h = Histogram('h', 'help', labelnames=ABCD.keys(), registry=None)
    c.labels(**ABCD).inc(1)
    g.labels(**ABCD).set(1)
    h.labels(**ABCD).observe(1)
    pid = 1
    c.labels(**ABCD).inc(1)
    g.labels(**ABCD).set(1)
    h.labels(**ABCD).observe(5)
    check('collect')


def test_collect_histogram_ordering():
    pid = 0
    values.ValueClass = MultiProcessValue(lambda: pid)
    h = Histogram('h', 'help', labelnames=['view'], registry=None)
    h.labels(view='view1').observe(1)
    pid = 1
    h.labels(view='view1').observe(5)
    h.labels(view='view2').observe(1)
    check('collect')


def test_restrict():
    pid = 0
    values.ValueClass = MultiProcessValue(lambda: pid)
    c = Counter('c', 'help', labelnames=ABCD.keys(), registry=None)
    g = Gauge('g', 'help', labelnames=ABCD.keys(), registry=None)
    c.labels(**ABCD).inc(1)
    g.labels(**ABCD).set(1)
    pid = 1
    c.labels(**ABCD).inc(1)
    g.labels(**ABCD).set(1)
    check('collect')


def test_collect_preserves_help():
    pid = 0
    values.ValueClass = MultiProcessValue(lambda: pid)
    c = Counter('c', 'c help', labelnames=ABCD.keys(), registry=None)
    g = Gauge('g', 'g help', labelnames=ABCD.keys(), registry=None)
    h = Histogram('h', 'h help', labelnames=ABCD.keys(), registry=None)
    c.labels(**ABCD).inc(1)
    g.labels(**ABCD).set(1)
    h.labels(**ABCD).observe(1)
    pid = 1
    c.labels(**ABCD).inc(1)
    g.labels(**ABCD).set(1)
    h.labels(**ABCD).observe(5)
    check('collect')


def test_merge_no_accumulate():
    pid = 0
    values.ValueClass = MultiProcessValue(lambda: pid)
    h = Histogram('h', 'help', labelnames=ABCD.keys(), registry=None)
    h.labels(**ABCD).observe(1)
    pid = 1
    h.labels(**ABCD).observe(5)
    check('merge')


def test_missing_gauge_file_during_merge():
    # Upstream merges two files that do not exist; nothing to write.
    check('merge')


def test_remove_clear_warning():
    with warnings.catch_warnings(record=True) as w:
        values.ValueClass = values.get_value_class()
        counter = Counter('c', 'help', labelnames=['label'], registry=None)
        counter.labels('label').inc()
        counter.remove('label')
        counter.clear()
        info(warnings=[str(x.message) for x in w if issubclass(x.category, UserWarning)])
    check('after')


def test_child_name_is_built_once_with_namespace_subsystem_unit():
    class CustomCounter(Counter):
        def __init__(self, name, documentation, labelnames=(), namespace='mydefaultnamespace',
                     subsystem='mydefaultsubsystem', unit='', registry=None, _labelvalues=None):
            super().__init__(name=name, documentation=documentation, labelnames=labelnames,
                             namespace=namespace, subsystem=subsystem, unit=unit,
                             registry=registry, _labelvalues=_labelvalues)

    use_pid(123)
    c = CustomCounter(name='m', documentation='help', labelnames=('status', 'method'),
                      namespace='ns', subsystem='ss', unit='seconds', registry=None)
    c.labels(status='200', method='GET').inc()
    c.labels(status='404', method='POST').inc()
    check('collect')


def test_child_preserves_parent_context_for_subclasses():
    class ContextAwareCounter(Counter):
        def __init__(self, name, documentation, labelnames=(), namespace='', subsystem='',
                     unit='', **kwargs):
            self.context = {'namespace': namespace, 'subsystem': subsystem, 'unit': unit}
            super().__init__(name, documentation, labelnames=labelnames, namespace=namespace,
                             subsystem=subsystem, unit=unit, **kwargs)

    use_pid(123)
    parent = ContextAwareCounter('m', 'help', labelnames=['status'], namespace='prod',
                                 subsystem='api', unit='seconds', registry=None)
    child = parent.labels(status='200')
    info(context=child.context)
    check('collect')


# --- TestMmapedDict: MmapedDict files, read by multiprom's reader ------------

def mmaped_dict():
    return mmap_dict.MmapedDict(os.path.join(mp_dir(), 'counter_1.db'))


def test_process_restart():
    d = mmaped_dict()
    d.write_value('abc', 123.0, 987.0)
    d.close()
    d = mmaped_dict()
    info(read_value=list(d.read_value('abc')))
    d.close()
    check('read')


def test_expansion():
    d = mmaped_dict()
    d.write_value('a' * mmap_dict._INITIAL_MMAP_SIZE, 123.0, 987.0)
    d.close()
    check('read')


def test_multi_expansion():
    d = mmaped_dict()
    d.write_value('abc', 42.0, 987.0)
    d.write_value('a' * mmap_dict._INITIAL_MMAP_SIZE * 4, 123.0, 876.0)
    d.write_value('def', 17.0, 765.0)
    d.close()
    check('read')


def test_corruption_detected():
    d = mmaped_dict()
    d.write_value('abc', 42.0, 987.0)
    d._m[8:16] = b'somejunk'
    try:
        list(d.read_all_values())
        info(python_raised=None)
    except RuntimeError as e:
        info(python_raised=str(e))
    d.close()
    check('read')


def main():
    name = sys.argv[1]
    test = globals().get(name)
    if not name.startswith('test_') or test is None:
        sys.exit(f'collector_upstream.py: no test {name!r}')
    test()
    values.close_all_multiprocess_files()
    values.ValueClass = values.MutexValue
    sys.stdout.write('DONE\n')
    sys.stdout.flush()


if __name__ == '__main__':
    main()
