"""The multiprom Python package's own behaviour (tests/integration/python_package.rs
with the pinned prometheus_client; python_package_releases.rs with older ones).

usage: python_package_tests.py   (unittest; exits non-zero if a test fails;
                                  prints each skipped test's name)

What prometheus_client's tests cannot show: bad files are skipped and
logged once instead of failing the scrape, the serving helpers work
unchanged on the drop-in, install() and the MULTIPROM_INSTALL start-up hook
swap it in without importing prometheus_client early, and concurrent
scrapes agree; install(writer=True) and the hook's `writer` feature put
multiprom's value class in, or keep prometheus_client's (with a warning)
when it has made values already.
"""

import asyncio
import glob
import gzip
import inspect
import json
import logging
import os
import time
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.parse
import urllib.request
import warnings
import wsgiref.util

from prometheus_client import (
    CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest, make_asgi_app,
    make_wsgi_app, start_http_server, values,
)
from prometheus_client.multiprocess import MultiProcessCollector as PythonCollector
from prometheus_client.openmetrics.exposition import generate_latest as generate_latest_om

import multiprom
from multiprom import _exposition

# Bounds every wait on a server or subprocess: a failing test fails, never hangs.
PATIENCE = 60


# What the installed prometheus_client has that an older release the
# package allows (0.18 on) lacks: tests/integration runs this script against
# several releases, and a test of what a release lacks is skipped, saying
# why (the Rust side holds each release's list of skips).
CLOSES_FILES = hasattr(values, 'close_all_multiprocess_files')
COLLECTORS_WITHOUT_NAMES = \
    'support_collectors_without_names' in inspect.signature(CollectorRegistry).parameters
ESCAPING = 'escaping' in inspect.signature(generate_latest).parameters
# Releases before 0.21 start the server and return nothing.
RETURNS_SERVER = inspect.signature(start_http_server).return_annotation not in (None, 'None')


def asgi_get(registry, query=b''):
    """make_asgi_app(registry)'s answer to GET /metrics?query: (status, body)."""
    sent = []

    async def receive():
        return {'type': 'http.request', 'body': b'', 'more_body': False}

    async def send(message):
        sent.append(message)

    scope = {'type': 'http', 'method': 'GET', 'path': '/metrics', 'query_string': query,
             'headers': []}
    asyncio.run(asyncio.wait_for(make_asgi_app(registry)(scope, receive, send), PATIENCE))
    return sent[0]['status'], b''.join(m.get('body', b'') for m in sent[1:])


def _asgi_names():
    """Whether the release's ASGI handler honours `?name[]=` (0.23 on; before,
    it looks the names up as text in a dict of bytes keys and answers the
    whole registry)."""
    registry = CollectorRegistry()
    Counter('kept', 'Kept.', registry=registry)
    Counter('left', 'Left.', registry=registry)
    return b'left' not in asgi_get(registry, b'name[]=kept_total')[1]


ASGI_NAMES = _asgi_names()


def close_files():
    """Closes the files prometheus_client's value class has open. Releases
    before 0.26 cannot: their files stay mapped, and what was written is in
    them for any reader."""
    if CLOSES_FILES:
        values.close_all_multiprocess_files()


def serve(registry):
    """prometheus_client's start_http_server on a free port: (port, stop)."""
    if RETURNS_SERVER:
        server, thread = start_http_server(0, addr='127.0.0.1', registry=registry)

        def stop():
            server.shutdown()
            server.server_close()
            thread.join(PATIENCE)
        return server.server_port, stop
    # Nothing to stop it with: it serves from a daemon thread until the
    # script ends. The port is found free first (it is asked for by number).
    import socket
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    start_http_server(port, addr='127.0.0.1', registry=registry)
    return port, lambda: None


class Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def take(self):
        records, self.records = self.records, []
        return [(r.levelname, r.getMessage()) for r in records]


class Sorted:
    """prometheus_client's merge over the directory's files in glob's order
    (the directory's, which multiprom also merges in), as a collector."""

    def __init__(self, path, registry=None):
        self.path = path
        if registry is not None:
            registry.register(self)

    def collect(self):
        return PythonCollector.merge(glob.glob(os.path.join(self.path, '*.db')))


def write_workers(directory, pids=(101, 102)):
    """Real prometheus_client writes: one counter, histogram and gauge per pid."""
    for pid in pids:
        values.ValueClass = values.MultiProcessValue(lambda pid=pid: pid)
        Counter('requests', 'Requests.', ['code'], registry=None).labels('200').inc(pid)
        Histogram('latency_seconds', 'Latency.', registry=None).observe(pid / 1000)
        Gauge('busy', 'Busy.', registry=None, multiprocess_mode='liveall').set(pid)
    close_files()
    values.ValueClass = values.MutexValue


class DropInTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='multiprom-py-')
        os.environ['PROMETHEUS_MULTIPROC_DIR'] = self.dir
        self.log = Captured()
        logger = logging.getLogger('multiprom')
        logger.addHandler(self.log)
        logger.setLevel(logging.DEBUG)

    def tearDown(self):
        logging.getLogger('multiprom').removeHandler(self.log)
        os.environ.pop('PROMETHEUS_MULTIPROC_DIR', None)
        os.environ.pop('prometheus_multiproc_dir', None)
        shutil.rmtree(self.dir, ignore_errors=True)

    def reference(self):
        return generate_latest(Sorted(self.dir))


class ConstructorTest(DropInTestCase):
    def test_path_from_the_environment_and_registration(self):
        write_workers(self.dir)
        registry = CollectorRegistry()
        collector = multiprom.MultiProcessCollector(registry)
        self.assertEqual(collector._path, self.dir)
        self.assertEqual(generate_latest(registry), self.reference())

    def test_no_registry_means_not_registered(self):
        write_workers(self.dir)
        collector = multiprom.MultiProcessCollector(None, path=self.dir)
        self.assertEqual(len(collector.collect()), 3)

    def test_same_errors_as_prometheus_client(self):
        del os.environ['PROMETHEUS_MULTIPROC_DIR']
        a_file = os.path.join(self.dir, 'not-a-dir')
        open(a_file, 'w').close()
        for args in [(), (a_file,), (os.path.join(self.dir, 'missing'),), ('',)]:
            for cls in (PythonCollector, multiprom.MultiProcessCollector):
                with self.assertRaises(ValueError) as raised:
                    cls(CollectorRegistry(), *args)
                self.assertEqual(str(raised.exception),
                                 'env PROMETHEUS_MULTIPROC_DIR is not set or not a directory')

    def test_legacy_variable_warns_and_is_copied(self):
        del os.environ['PROMETHEUS_MULTIPROC_DIR']
        os.environ['prometheus_multiproc_dir'] = self.dir
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            collector = multiprom.MultiProcessCollector(CollectorRegistry())
        self.assertEqual(collector._path, self.dir)
        self.assertEqual(os.environ['PROMETHEUS_MULTIPROC_DIR'], self.dir)
        self.assertEqual([w.category for w in caught], [DeprecationWarning])

    def test_empty_variable_does_not_fall_through_to_the_legacy_name(self):
        # The same outcome and the same side effects as prometheus_client,
        # for each way the two names can be set.
        cases = [('', self.dir), ('', None), (None, ''), (self.dir, '')]
        for upper, legacy in cases:
            outcomes = []
            for cls in (PythonCollector, multiprom.MultiProcessCollector):
                for name, value in (('PROMETHEUS_MULTIPROC_DIR', upper),
                                    ('prometheus_multiproc_dir', legacy)):
                    os.environ.pop(name, None)
                    if value is not None:
                        os.environ[name] = value
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter('always')
                    try:
                        outcome = cls(None)._path
                    except ValueError as error:
                        outcome = str(error)
                outcomes.append((outcome, os.environ.get('PROMETHEUS_MULTIPROC_DIR'),
                                 [w.category for w in caught]))
            self.assertEqual(outcomes[0], outcomes[1], (upper, legacy))

    def test_path_like(self):
        import pathlib
        write_workers(self.dir)
        collector = multiprom.MultiProcessCollector(None, path=pathlib.Path(self.dir))
        self.assertEqual(generate_latest(Fixed(collector.collect())), self.reference())


class Fixed:
    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self):
        return self.metrics


class BadFilesTest(DropInTestCase):
    def test_bad_files_are_skipped_and_logged_once(self):
        write_workers(self.dir)
        good = self.reference()
        # A worker killed between create and truncate (prometheus_client
        # issue #1199): a 0-byte file left for more than the 10 s a writer
        # may take to create one; and a foreign file that ends in .db.
        stale = os.path.join(self.dir, 'counter_999.db')
        open(stale, 'wb').close()
        an_hour_ago = time.time() - 3600
        os.utime(stale, (an_hour_ago, an_hour_ago))
        with open(os.path.join(self.dir, 'histogram_998.db'), 'wb') as f:
            f.write(b'SQLite format 3\x00' + b'\x00' * 4080)
        with self.assertRaises(Exception):
            generate_latest(Sorted(self.dir))  # Python's scrape fails as a whole
        registry = CollectorRegistry()
        multiprom.MultiProcessCollector(registry)
        self.assertEqual(generate_latest(registry), good)
        reports = self.log.take()
        self.assertEqual([level for level, _ in reports], ['WARNING', 'WARNING'], reports)
        # In the directory's listing order, as the files are merged.
        texts = sorted(text for _, text in reports)
        self.assertIn('counter_999.db: offset 0: 0-byte file', texts[0])
        self.assertIn('histogram_998.db', texts[1])
        # Reported once, not on every scrape.
        self.assertEqual(generate_latest(registry), good)
        self.assertEqual(self.log.take(), [])

    def test_vanished_files_in_merge_are_skipped_quietly(self):
        missing = [os.path.join(self.dir, 'gauge_liveall_9999999.db'),
                   os.path.join(self.dir, 'counter_9999999.db')]
        self.assertEqual(multiprom.MultiProcessCollector.merge(missing), [])
        self.assertEqual([level for level, _ in self.log.take()], ['INFO', 'INFO'])

    def test_directory_removed_after_construction(self):
        write_workers(self.dir)
        collector = multiprom.MultiProcessCollector(None)
        shutil.rmtree(self.dir)
        self.assertEqual(collector.collect(), [])
        reports = self.log.take()
        self.assertEqual(len(reports), 1, reports)
        self.assertIn('cannot list directory', reports[0][1])


class ServingTest(DropInTestCase):
    """The serving helpers, unchanged, on a registry holding the drop-in."""

    def setUp(self):
        super().setUp()
        write_workers(self.dir)
        self.registry = CollectorRegistry()
        multiprom.MultiProcessCollector(self.registry)

    def test_generate_latest_both_formats(self):
        self.assertEqual(generate_latest(self.registry), self.reference())
        self.assertEqual(generate_latest_om(self.registry), generate_latest_om(Sorted(self.dir)))

    def test_make_wsgi_app(self):
        environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/metrics', 'QUERY_STRING': ''}
        wsgiref.util.setup_testing_defaults(environ)
        status = []
        body = b''.join(make_wsgi_app(self.registry)(environ, lambda s, h: status.append(s)))
        self.assertEqual(status, ['200 OK'])
        self.assertEqual(body, self.reference())

    def test_make_asgi_app(self):
        self.assertEqual(asgi_get(self.registry), (200, self.reference()))

    def test_start_http_server(self):
        port, stop = serve(self.registry)
        try:
            url = f'http://127.0.0.1:{port}/metrics'
            with urllib.request.urlopen(url, timeout=PATIENCE) as response:
                self.assertEqual(response.status, 200)
                self.assertEqual(response.read(), self.reference())
        finally:
            stop()


def write_named_workers(directory, pids=(101, 102, 103)):
    """Real prometheus_client writes of every kind, a name with colons too."""
    for pid in pids:
        values.ValueClass = values.MultiProcessValue(lambda pid=pid: pid)
        requests = Counter('requests', 'Requests.', ['code'], registry=None)
        requests.labels('200').inc(pid)
        requests.labels('500').inc()
        Histogram('latency_seconds', 'Latency.', registry=None).observe(pid / 1000)
        Summary('size_bytes', 'Size.', registry=None).observe(pid)
        Gauge('busy', 'Busy.', registry=None, multiprocess_mode='liveall').set(pid)
        Gauge('vllm:num_requests_waiting', 'Waiting.', registry=None,
              multiprocess_mode='livesum').set(pid % 5)
    close_files()
    values.ValueClass = values.MutexValue


# Sample names, as `?name[]=` gives them; family names select nothing.
NAME_SETS = [
    ['requests_total'],
    ['latency_seconds_bucket'],
    ['latency_seconds_sum', 'latency_seconds_count', 'size_bytes_count'],
    ['busy'],
    ['vllm:num_requests_waiting'],
    ['requests_total', 'vllm:num_requests_waiting', 'no_such_sample'],
    ['no_such_sample'],
    ['requests', 'latency_seconds'],
]

# prometheus_client's own encoders (install() or a multiprom collector may
# have put engine-encoded ones in their place).
python_text = inspect.unwrap(generate_latest)
python_openmetrics = inspect.unwrap(generate_latest_om)


class RestrictedTest(DropInTestCase):
    """`registry.restricted_registry(names)`, which prometheus_client's
    handlers make for `GET /metrics?name[]=...`, keeps the named samples of a
    multiprom collector: what prometheus_client's single-process restricted
    registry keeps of the same Metric objects, byte for byte."""

    def setUp(self):
        super().setUp()
        write_named_workers(self.dir)
        self.registry = CollectorRegistry()
        multiprom.MultiProcessCollector(self.registry)

    def restricted_metrics(self, names):
        metrics = [m._restricted_metric(set(names)) for m in Sorted(self.dir).collect()]
        return [m for m in metrics if m]

    def expected(self, names, openmetrics=False):
        encode = python_openmetrics if openmetrics else python_text
        return encode(Fixed(self.restricted_metrics(names)))

    def test_the_expectation_keeps_what_it_should(self):
        self.assertEqual(self.expected(['no_such_sample']), b'')
        both = self.expected(['requests_total', 'vllm:num_requests_waiting']).decode()
        self.assertIn('requests_total{code="200"} 306.0\n', both)
        self.assertIn('vllm:num_requests_waiting 6.0\n', both)
        self.assertNotIn('latency', both)

    def test_collect_with_names(self):
        collector = multiprom.MultiProcessCollector(None)
        for names in NAME_SETS:
            want = self.restricted_metrics(names)
            self.assertEqual(list(collector._collect_only(set(names))), want, names)
            metrics, _ = multiprom._native.DirCollector(self.dir).collect(iter(names))
            self.assertEqual(list(metrics), want, names)
        with self.assertRaises(TypeError):
            collector._engine.collect('requests_total')
        # The engine those filtered collections went through still collects all.
        self.assertEqual(python_text(Fixed(collector.collect())), self.reference())

    def test_generate_latest_of_a_restricted_registry(self):
        for names in NAME_SETS:
            restricted = self.registry.restricted_registry(names)
            for openmetrics, encode in ((False, python_text), (True, python_openmetrics)):
                want = self.expected(names, openmetrics)
                # The Metric path: the registry's samples, Python's encoder.
                self.assertEqual(encode(restricted), want, names)
                # The engine's encoder.
                text = _exposition._expose(restricted, openmetrics)
                self.assertIsNotNone(text, names)
                self.assertEqual(text + (b'# EOF\n' if openmetrics else b''), want, names)

    def test_a_registry_with_other_collectors(self):
        Counter('own', 'Own.', registry=self.registry).inc()
        names = ['own_total', 'requests_total', 'latency_seconds_count']
        want = self.expected(names) + b'# HELP own_total Own.\n# TYPE own_total counter\nown_total 1.0\n'
        # Python orders a restricted registry's collectors as a set does.
        self.assertEqual(families(python_text(self.registry.restricted_registry(names))),
                         families(want))

    @unittest.skipUnless(COLLECTORS_WITHOUT_NAMES,
                         'CollectorRegistry has no support_collectors_without_names (before 0.25)')
    def test_a_registry_that_supports_collectors_without_names(self):
        registry = CollectorRegistry(support_collectors_without_names=True)
        multiprom.MultiProcessCollector(registry)
        for names in NAME_SETS:
            self.assertEqual(python_text(registry.restricted_registry(names)), self.expected(names))

    def test_a_subclass_collects_its_own_way(self):
        registry = CollectorRegistry()
        MultipromOnlyCounters(registry)
        names = {'requests_total', 'latency_seconds_count'}
        kept = [m._restricted_metric(names) for m in PythonOnlyCounters(None).collect()]
        want = python_text(Fixed([m for m in kept if m]))
        self.assertIn(b'requests_total', want)
        self.assertEqual(python_text(registry.restricted_registry(names)), want)
        self.assertEqual(generate_latest(registry.restricted_registry(names)), want)

    def test_a_registry_of_prometheus_clients_collector_is_answered_as_before(self):
        registry = CollectorRegistry()
        PythonCollector(registry)
        self.assertEqual(python_text(registry.restricted_registry(['requests_total'])), b'')

    def get_wsgi(self, query, headers=None):
        environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/metrics', 'QUERY_STRING': query}
        environ.update(headers or {})
        wsgiref.util.setup_testing_defaults(environ)
        status = []
        body = b''.join(make_wsgi_app(self.registry)(environ, lambda s, h: status.append((s, h))))
        return status[0][0], dict(status[0][1]), body

    def test_make_wsgi_app(self):
        openmetrics = {'HTTP_ACCEPT': 'application/openmetrics-text; version=1.0.0'}
        gzipped = {'HTTP_ACCEPT_ENCODING': 'gzip'}
        for names in NAME_SETS:
            query = urllib.parse.urlencode([('name[]', name) for name in names])
            for headers in ({}, openmetrics, gzipped, {**openmetrics, **gzipped}):
                status, sent, body = self.get_wsgi(query, headers)
                self.assertEqual(status, '200 OK')
                if 'HTTP_ACCEPT_ENCODING' in headers:
                    self.assertEqual(sent['Content-Encoding'], 'gzip')
                    body = gzip.decompress(body)
                self.assertEqual(body, self.expected(names, 'HTTP_ACCEPT' in headers), (names, headers))
        # Percent-encoded brackets and colons, as HTTP clients send them.
        query = 'name%5B%5D=vllm%3Anum_requests_waiting&name%5B%5D=busy'
        self.assertEqual(self.get_wsgi(query)[2],
                         self.expected(['vllm:num_requests_waiting', 'busy']))

    def test_make_asgi_app(self):
        names = ['latency_seconds_bucket', 'vllm:num_requests_waiting']
        query = urllib.parse.urlencode([('name[]', name) for name in names]).encode()
        self.assertEqual(asgi_get(self.registry, query), (200, self.expected(names)))
        # A registry holding its own counter beside the collector: both kept.
        Counter('own', 'Own.', registry=self.registry).inc()
        status, body = asgi_get(self.registry, query + b'&name%5B%5D=own_total')
        self.assertEqual(families(body), families(
            self.expected(names) + b'# HELP own_total Own.\n# TYPE own_total counter\nown_total 1.0\n'))
        # A registry without one is answered as the release answers it: the
        # whole registry where its handler drops the names.
        own = CollectorRegistry()
        Counter('kept', 'Kept.', registry=own).inc()
        Counter('left', 'Left.', registry=own)
        want = python_text(own.restricted_registry(['kept_total'])) if ASGI_NAMES \
            else python_text(own)
        self.assertEqual(asgi_get(own, b'name[]=kept_total'), (200, want))

    def test_start_http_server(self):
        port, stop = serve(self.registry)
        try:
            base = f'http://127.0.0.1:{port}/metrics?'
            for names in (['requests_total', 'vllm:num_requests_waiting'], ['no_such_sample']):
                query = urllib.parse.urlencode([('name[]', name) for name in names])
                with urllib.request.urlopen(base + query, timeout=PATIENCE) as response:
                    self.assertEqual(response.status, 200)
                    self.assertEqual(response.read(), self.expected(names))
            request = urllib.request.Request(
                base + 'name[]=latency_seconds_sum&name[]=size_bytes_count',
                headers={'Accept': 'application/openmetrics-text; version=1.0.0',
                         'Accept-Encoding': 'gzip'})
            with urllib.request.urlopen(request, timeout=PATIENCE) as response:
                self.assertEqual(gzip.decompress(response.read()),
                                 self.expected(['latency_seconds_sum', 'size_bytes_count'], True))
        finally:
            stop()


def families(text):
    """The text's families, each its lines from `# HELP` on, as a set."""
    blocks = text.decode().split('# HELP ')
    return {'# HELP ' + block for block in blocks if block}


class ConcurrencyTest(DropInTestCase):
    def test_threads_share_one_collector(self):
        write_workers(self.dir, pids=range(1, 41))
        collector = multiprom.MultiProcessCollector(None)
        want = self.reference()
        results = []

        def scrape():
            for _ in range(10):
                results.append(generate_latest(Fixed(collector.collect())))

        threads = [threading.Thread(target=scrape) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(PATIENCE)
        self.assertEqual(len(results), 40)
        self.assertTrue(all(r == want for r in results))


class ForkTest(DropInTestCase):
    def test_collector_made_before_fork_sees_new_files_in_the_child(self):
        # A pre-fork server that builds its collector in the master: the
        # child's collections must still notice files created after the fork.
        write_workers(self.dir, pids=(101,))
        collector = multiprom.MultiProcessCollector(None)
        before = sum(s.value for m in collector.collect() if m.name == 'requests'
                     for s in m.samples)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                shutil.copy(os.path.join(self.dir, 'counter_101.db'),
                            os.path.join(self.dir, 'counter_202.db'))
                after = sum(s.value for m in collector.collect() if m.name == 'requests'
                            for s in m.samples)
                status = 0 if after == 2 * before else 3
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0,
                         'the child did not see the file created after the fork')


def only_counter_files(files):
    """What an application's merge() override might do: filter the files."""
    return [f for f in files if os.path.basename(f).startswith('counter_')]


class PythonOnlyCounters(PythonCollector):
    @staticmethod
    def merge(files, accumulate=True):
        return PythonCollector.merge(only_counter_files(files), accumulate)


class MultipromOnlyCounters(multiprom.MultiProcessCollector):
    @staticmethod
    def merge(files, accumulate=True):
        return multiprom.MultiProcessCollector.merge(only_counter_files(files), accumulate)


class SubclassTest(DropInTestCase):
    def test_an_overridden_merge_is_honoured(self):
        write_workers(self.dir)
        want = generate_latest(registry_of(PythonOnlyCounters(None)))
        self.assertIn(b'requests_total', want)
        self.assertNotIn(b'latency_seconds', want)
        got = generate_latest(registry_of(MultipromOnlyCounters(None)))
        self.assertEqual(got, want)
        self.assertEqual(list(MultipromOnlyCounters(None).collect()),
                         list(PythonOnlyCounters(None).collect()))

    CODE = """
import json, os
import multiprom; multiprom.install()
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import multiprocess

class OnlyCounters(multiprocess.MultiProcessCollector):
    @staticmethod
    def merge(files, accumulate=True):
        files = [f for f in files if os.path.basename(f).startswith('counter_')]
        return multiprocess.MultiProcessCollector.merge(files, accumulate)

registry = CollectorRegistry(); OnlyCounters(registry)
print(json.dumps([OnlyCounters.__mro__[1].__module__, generate_latest(registry).decode()]))
"""

    def test_an_overridden_merge_is_honoured_after_install(self):
        write_workers(self.dir)
        want = generate_latest(registry_of(PythonOnlyCounters(None))).decode()
        lines, _ = run_python(self.CODE, env={'PROMETHEUS_MULTIPROC_DIR': self.dir}, split=False)
        self.assertEqual(json.loads(lines), ['multiprom', want])


def registry_of(collector):
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


class LateInstallTest(DropInTestCase):
    """install() after code bound prometheus_client's class (as
    prometheus_flask_exporter.multiprocess does when imported): that class
    keeps working, on prometheus_client's own code. In a fresh interpreter."""

    CODE = """
import glob, json, os
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import generate_latest as generate_latest_om

class Subclass(MultiProcessCollector):
    pass

def outputs():
    registry = CollectorRegistry(); MultiProcessCollector(registry)
    files = sorted(glob.glob(os.path.join(os.environ['PROMETHEUS_MULTIPROC_DIR'], '*.db')))
    return [generate_latest(registry).decode(), generate_latest_om(registry).decode(),
            repr(list(MultiProcessCollector(None).collect())),
            repr(list(Subclass(None).collect())),
            repr(list(MultiProcessCollector.merge(files, accumulate=False)))]

before = outputs()
import multiprom; multiprom.install()
from prometheus_client import multiprocess
after = outputs()
print(json.dumps([multiprocess.MultiProcessCollector.__module__, before, after]))
"""

    def test_early_bound_class_works_after_install(self):
        write_workers(self.dir)
        out, _ = run_python(self.CODE, env={'PROMETHEUS_MULTIPROC_DIR': self.dir}, split=False)
        installed, before, after = json.loads(out)
        self.assertEqual(installed, 'multiprom')
        self.assertIn('requests_total{code="200"} 203.0', before[0])
        self.assertEqual(after, before)


# Counts the engine-encoded answers of generate_latest, then runs the test's
# code; the code records named checks, printed as JSON.
SPY = """
import json
from multiprom import _exposition
checks = {}
engine_texts = []
_expose = _exposition._expose

def spy(registry, openmetrics, escaping='underscores'):
    text = _expose(registry, openmetrics, escaping)
    engine_texts.append(text is not None)
    return text

_exposition._expose = spy

def check(name, call, engine, want):
    engine_texts.clear()
    got = call()
    checks[name + ': engine-encoded' if engine else name + ': prometheus_client'] = \
        engine_texts == [engine] or (not engine and not any(engine_texts))
    checks[name + ': equal'] = len(got) > 0 and got == want
"""

WSGI = """
import wsgiref.util
def wsgi_get(registry, query='', accept=None):
    environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/metrics', 'QUERY_STRING': query}
    if accept:
        environ['HTTP_ACCEPT'] = accept
    wsgiref.util.setup_testing_defaults(environ)
    return b''.join(make_wsgi_app(registry)(environ, lambda s, h: None))
"""


class EngineExpositionTest(DropInTestCase):
    """prometheus_client's generate_latest functions are engine-encoded for a
    registry holding only a multiprom collector, prometheus_client's own
    otherwise; the same bytes either way. Both ways of adopting multiprom in
    code get it, even where generate_latest was imported before. In fresh
    interpreters, as these patch prometheus_client."""

    def run_checks(self, code):
        write_workers(self.dir)
        out, _ = run_python(f'ESCAPING = {ESCAPING}\n' + SPY
                            + WSGI.replace('make_wsgi_app', 'prometheus_client.make_wsgi_app')
                            + code + '\nprint(json.dumps(checks))',
                            env={'PROMETHEUS_MULTIPROC_DIR': self.dir}, split=False)
        checks = json.loads(out)
        self.assertGreater(len(checks), 2)
        self.assertEqual(checks, {name: True for name in checks})
        return checks

    INSTALLED = """
import multiprom; multiprom.install()
import prometheus_client
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client import exposition
from prometheus_client.openmetrics import exposition as om
from prometheus_client.multiprocess import MultiProcessCollector
python_text, python_om = generate_latest.__wrapped__, om.generate_latest.__wrapped__
checks['one function'] = generate_latest is exposition.generate_latest is prometheus_client.generate_latest
only = CollectorRegistry(); MultiProcessCollector(only)
check('text', lambda: generate_latest(only), True, python_text(only))
check('openmetrics', lambda: om.generate_latest(only), True, python_om(only))
check('wsgi', lambda: wsgi_get(only), True, python_text(only))
# What Prometheus 3 asks for (UTF-8 names), as releases that know escaping
# schemes answer it.
PROMETHEUS_3 = ('application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,'
                'text/plain;version=0.0.4;q=0.3,*/*;q=0.2')
check('wsgi prometheus 3', lambda: wsgi_get(only, accept=PROMETHEUS_3), True,
      python_om(only, 'allow-utf-8') if ESCAPING else python_om(only))
restricted = only.restricted_registry(['requests_total'])
check('restricted', lambda: generate_latest(restricted), True, python_text(restricted))
check('wsgi name[]', lambda: wsgi_get(only, 'name[]=requests_total'), True, python_text(restricted))
mixed = CollectorRegistry(); MultiProcessCollector(mixed)
Counter('own', 'Own.', registry=mixed).inc()
check('mixed', lambda: generate_latest(mixed), False, python_text(mixed))
checks['mixed has both'] = b'own_total 1.0' in generate_latest(mixed) and b'requests_total' in generate_latest(mixed)
if ESCAPING:
    check('utf-8 escaping', lambda: generate_latest(only, escaping='allow-utf-8'), True,
          python_text(only, 'allow-utf-8'))
"""

    def test_installed(self):
        self.run_checks(self.INSTALLED)

    # docs/python.md's first way: the application's own code, generate_latest
    # imported before the collector is made, no install().
    IN_CODE = """
import inspect
import prometheus_client
from prometheus_client import CollectorRegistry, REGISTRY, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as om_latest
import multiprom
registry = CollectorRegistry()
multiprom.MultiProcessCollector(registry)
import prometheus_client.multiprocess
checks['not installed'] = \
    prometheus_client.multiprocess.MultiProcessCollector.__module__ == 'prometheus_client.multiprocess'
python_text, python_om = generate_latest.__wrapped__, om_latest.__wrapped__
check('text', lambda: generate_latest(registry), True, python_text(registry))
check('text, again', lambda: generate_latest(registry), True, python_text(registry))
check('openmetrics', lambda: om_latest(registry), True, python_om(registry))
check('wsgi', lambda: wsgi_get(registry), True, python_text(registry))
restricted = registry.restricted_registry(['latency_seconds_bucket'])
check('restricted', lambda: generate_latest(restricted), True, python_text(restricted))
python = CollectorRegistry(); prometheus_client.multiprocess.MultiProcessCollector(python)
check("prometheus_client's collector", lambda: generate_latest(python), False, python_text(registry))
checks['same signature'] = inspect.signature(generate_latest) == inspect.signature(python_text)
# The default registry's process and GC samples move between two calls
# (CPU time, memory): its families and series must be the same, every
# sample line but its value.
def without_values(text):
    return [line if line.startswith(b'#') else line.rsplit(b' ', 1)[0] for line in text.splitlines()]
checks['default registry'] = without_values(generate_latest()) == without_values(python_text())
"""

    def test_used_in_code(self):
        self.run_checks(self.IN_CODE)

    # A collector made before prometheus_client.exposition is imported.
    BEFORE_IMPORT = """
import os, sys
import multiprom
collector = multiprom.MultiProcessCollector(None)
checks['exposition not imported'] = 'prometheus_client.exposition' not in sys.modules
from prometheus_client import CollectorRegistry, generate_latest
registry = CollectorRegistry(); registry.register(collector)
check('text', lambda: generate_latest(registry), True, generate_latest.__wrapped__(registry))
restricted = registry.restricted_registry(['requests_total'])
check('restricted', lambda: generate_latest(restricted), True, generate_latest.__wrapped__(restricted))
checks['restricted has the sample'] = b'requests_total{code="200"} 203.0' in generate_latest(restricted)
"""

    def test_collector_made_before_prometheus_client_is_imported(self):
        self.run_checks(self.BEFORE_IMPORT)

    EXPOSITION_FALSE = """
import multiprom
from prometheus_client import CollectorRegistry, generate_latest
registry = CollectorRegistry(); multiprom.MultiProcessCollector(registry)
checks['patched'] = hasattr(generate_latest, '__wrapped__')
python_text = generate_latest.__wrapped__
multiprom.install(exposition=False)
checks['unpatched'] = not hasattr(generate_latest, '__wrapped__')
check('text', lambda: generate_latest(registry), False, python_text(registry))
multiprom.MultiProcessCollector(CollectorRegistry())
check('text after another collector', lambda: generate_latest(registry), False, python_text(registry))
multiprom.install()
check('text installed again', lambda: generate_latest(registry), True, python_text(registry))
"""

    def test_install_exposition_false_puts_generate_latest_back(self):
        self.run_checks(self.EXPOSITION_FALSE)

    def test_exposition_false_leaves_generate_latest_alone(self):
        lines, _ = run_python('import multiprom; multiprom.install(exposition=False); '
                              'from prometheus_client import generate_latest; '
                              "print(hasattr(generate_latest, '__wrapped__'))")
        self.assertEqual(lines, ['False'])


def run_python(code, env=None, split=True):
    """`code` in a fresh interpreter of this venv; returns its stdout (as
    words unless not `split`) and stderr."""
    full_env = {k: v for k, v in os.environ.items() if k != 'MULTIPROM_INSTALL'}
    full_env.update(env or {})
    out = subprocess.run([sys.executable, '-c', code], env=full_env, capture_output=True,
                         text=True, timeout=PATIENCE)
    if out.returncode != 0:
        raise AssertionError(f'python -c failed ({out.returncode}):\n{out.stderr}')
    return (out.stdout.split() if split else out.stdout), out.stderr


SHOW = ('import sys; print("prometheus_client" in sys.modules); '
        'from prometheus_client.multiprocess import MultiProcessCollector as C; '
        'print(C.__module__)')


class InstallTest(unittest.TestCase):
    def test_install_before_prometheus_client_is_imported(self):
        lines, _ = run_python('import sys, multiprom; multiprom.install(); ' + SHOW)
        # install() did not import prometheus_client; the import patched it.
        self.assertEqual(lines, ['False', 'multiprom'])

    def test_install_after_prometheus_client_is_imported(self):
        lines, _ = run_python('import prometheus_client.multiprocess, multiprom; '
                              'multiprom.install(); ' + SHOW)
        self.assertEqual(lines, ['True', 'multiprom'])

    def test_values_still_see_a_directory_set_after_install(self):
        # vLLM's order: install (or start-up hook), then set the variable, then
        # import prometheus_client. Its values must be multiprocess ones.
        directory = tempfile.mkdtemp(prefix='multiprom-py-')
        try:
            lines, _ = run_python(
                'import os, sys, multiprom; multiprom.install(); '
                f'os.environ["PROMETHEUS_MULTIPROC_DIR"] = {directory!r}; '
                'from prometheus_client import Counter, CollectorRegistry, generate_latest; '
                'from prometheus_client import multiprocess; '
                'Counter("c", "C.").inc(7); r = CollectorRegistry(); '
                'multiprocess.MultiProcessCollector(r); '
                'print(type(r._collector_to_names and list(r._collector_to_names)[0]).__module__); '
                'print(generate_latest(r).decode().split("\\n")[2])')
            self.assertEqual(lines, ['multiprom', 'c_total', '7.0'])
        finally:
            shutil.rmtree(directory)

    def test_startup_hook_is_off_by_default(self):
        for value in (None, '', '0', 'false', 'off'):
            env = {} if value is None else {'MULTIPROM_INSTALL': value}
            lines, _ = run_python(SHOW, env)
            self.assertEqual(lines, ['False', 'prometheus_client.multiprocess'], value)

    def test_startup_hook_installs_without_importing_prometheus_client(self):
        for value in ('1', 'true', 'yes'):
            lines, _ = run_python(SHOW, {'MULTIPROM_INSTALL': value})
            self.assertEqual(lines, ['False', 'multiprom'], value)

    def test_startup_hook_never_fails_start_up(self):
        # A broken `multiprom` shadowing the installed one.
        shadow = tempfile.mkdtemp(prefix='multiprom-shadow-')
        try:
            os.makedirs(os.path.join(shadow, 'multiprom'))
            with open(os.path.join(shadow, 'multiprom', '__init__.py'), 'w') as f:
                f.write('raise RuntimeError("broken on purpose")\n')
            lines, stderr = run_python(SHOW, {'MULTIPROM_INSTALL': '1', 'PYTHONPATH': shadow})
            self.assertEqual(lines, ['False', 'prometheus_client.multiprocess'])
            self.assertIn('RuntimeWarning', stderr)
            self.assertIn('broken on purpose', stderr)
        finally:
            shutil.rmtree(shadow)


SHOW_WRITER = ('import os, sys; from prometheus_client import values, Counter; '
               'from prometheus_client.multiprocess import MultiProcessCollector as C; '
               'from multiprom import _native; '
               'print(issubclass(values.ValueClass, _native.Value), '
               'values.MultiProcessValue.__module__, C.__module__); '
               'Counter("c", "C.").inc(2); '
               'd = os.environ.get("PROMETHEUS_MULTIPROC_DIR"); '
               'print(sorted(os.listdir(d)) if d else None)')


class WriterInstallTest(unittest.TestCase):
    """install(writer=True) and MULTIPROM_INSTALL's writer feature."""

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix='multiprom-writer-')

    def tearDown(self):
        shutil.rmtree(self.directory)

    def test_install_before_import(self):
        lines, stderr = run_python(
            'import os, sys, multiprom; multiprom.install(writer=True); '
            'print("prometheus_client" in sys.modules); ' + SHOW_WRITER,
            {'PROMETHEUS_MULTIPROC_DIR': self.directory}, split=False)
        out = lines.splitlines()
        self.assertEqual(out[0], 'False')
        self.assertEqual(out[1], 'True multiprom._values multiprom')
        self.assertRegex(out[2], r"^\['counter_\d+\.db'\]$")
        self.assertNotIn('Warning', stderr)

    def test_install_before_the_directory_is_set(self):
        # The variable set after install(), before prometheus_client is
        # imported: values decides then, and gets multiprom's class.
        lines, _ = run_python(
            'import os, multiprom; multiprom.install(writer=True); '
            f'os.environ["PROMETHEUS_MULTIPROC_DIR"] = {self.directory!r}; ' + SHOW_WRITER,
            split=False)
        out = lines.splitlines()
        self.assertEqual(out[0], 'True multiprom._values multiprom')
        self.assertRegex(out[1], r"^\['counter_\d+\.db'\]$")
        # Python's collector reads what multiprom's writer wrote.
        lines, _ = run_python(
            'from prometheus_client import CollectorRegistry; '
            'from prometheus_client.multiprocess import MultiProcessCollector; '
            'r = CollectorRegistry(); MultiProcessCollector(r); '
            'print(r.get_sample_value("c_total"))',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(lines, ['2.0'])

    def test_writer_alone_leaves_the_collector(self):
        lines, _ = run_python('import multiprom; multiprom.install(writer=True, collector=False); '
                              + SHOW_WRITER, {'PROMETHEUS_MULTIPROC_DIR': self.directory},
                              split=False)
        self.assertEqual(lines.splitlines()[0],
                         'True multiprom._values prometheus_client.multiprocess')

    def test_install_without_writer_leaves_the_value_class(self):
        lines, _ = run_python('import multiprom; multiprom.install(); ' + SHOW_WRITER,
                              {'PROMETHEUS_MULTIPROC_DIR': self.directory}, split=False)
        self.assertEqual(lines.splitlines()[0], 'False prometheus_client.values multiprom')

    def test_single_process_mode_stays(self):
        lines, _ = run_python('import multiprom; multiprom.install(writer=True); '
                              'from prometheus_client import values; '
                              'print(values.ValueClass.__name__, values.MultiProcessValue.__module__)')
        self.assertEqual(lines, ['MutexValue', 'multiprom._values'])

    def test_install_after_import_replaces_an_unused_class(self):
        lines, stderr = run_python(
            'import prometheus_client, multiprom; multiprom.install(writer=True); ' + SHOW_WRITER,
            {'PROMETHEUS_MULTIPROC_DIR': self.directory}, split=False)
        self.assertEqual(lines.splitlines()[0], 'True multiprom._values multiprom')
        self.assertNotIn('Warning', stderr)

    def test_a_corrupt_file_of_the_identifier_is_set_aside(self):
        # A file left under this process's identifier by an earlier process,
        # damaged (a key that is not JSON): prometheus_client's writer
        # appends after it (and its collector fails every scrape on it);
        # multiprom's moves it out of the *.db names, logs it, and begins a
        # new file, so the application goes on and every reader reads.
        key = b'not json'
        entry = (len(key).to_bytes(4, 'little') + key + b' ' * (8 - (4 + len(key)) % 8)
                 + struct.pack('<dd', 5.0, 0.0))
        used = 8 + len(entry)
        with open(os.path.join(self.directory, 'counter_31.db'), 'wb') as f:
            f.write(used.to_bytes(4, 'little') + bytes(4) + entry)
            f.truncate(65536)
        lines, stderr = run_python(
            'import logging, os; logging.basicConfig(); import multiprom; '
            'multiprom.install(writer=True); '
            'from prometheus_client import values, Counter; '
            'values.ValueClass = multiprom.MultiProcessValue(lambda: 31); '
            'Counter("c", "C.").inc(3); '
            'print(sorted(n.split("-")[0] for n in os.listdir(os.environ["PROMETHEUS_MULTIPROC_DIR"]))); '
            'from prometheus_client import CollectorRegistry; '
            'from prometheus_client.multiprocess import MultiProcessCollector; '
            'r = CollectorRegistry(); MultiProcessCollector(r); '
            'print(r.get_sample_value("c_total"))',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory}, split=False)
        self.assertEqual(lines.splitlines(), ["['counter_31.db', 'counter_31.db.corrupt']", '3.0'],
                         stderr)
        self.assertIn('WARNING:multiprom:', stderr)
        self.assertIn('counter_31.db: offset 8: key is not valid JSON', stderr)
        self.assertIn('counter_31.db.corrupt-', stderr)

    def test_os_errors_name_the_file_as_text(self):
        # As prometheus_client's: OSError.filename is the str os.path.join gives.
        lines, _ = run_python(
            'import multiprom; multiprom.install(writer=True); '
            'from prometheus_client import Counter\n'
            'try:\n'
            '    Counter("c", "C.").inc()\n'
            'except OSError as error:\n'
            '    print(type(error).__name__, type(error.filename).__name__, error.filename.endswith(".db"))',
            {'PROMETHEUS_MULTIPROC_DIR': os.path.join(self.directory, 'missing')})
        self.assertEqual(lines, ['FileNotFoundError', 'str', 'True'])

    def test_install_keeps_the_process_identifier(self):
        lines, _ = run_python(
            'from prometheus_client import values, Counter; import multiprom, os; '
            'values.ValueClass = values.MultiProcessValue(lambda: 77); '
            'multiprom.install(writer=True); '
            'from multiprom import _native; '
            'print(issubclass(values.ValueClass, _native.Value)); '
            'Counter("c", "C.").inc(); print(os.listdir(os.environ["PROMETHEUS_MULTIPROC_DIR"]))',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(lines, ['True', "['counter_77.db']"])

    def test_late_install_keeps_pythons_class_and_warns(self):
        # Metrics made by prometheus_client's class already: replacing it
        # would put two writers on one file.
        lines, stderr = run_python(
            'import warnings; warnings.simplefilter("always"); '
            'from prometheus_client import values, Counter; import multiprom; '
            'Counter("early", "Made first.").inc(); '
            'multiprom.install(writer=True); ' + SHOW_WRITER,
            {'PROMETHEUS_MULTIPROC_DIR': self.directory}, split=False)
        self.assertEqual(lines.splitlines()[0], 'False multiprom._values multiprom')
        self.assertIn('RuntimeWarning', stderr)
        self.assertIn('has made 1 values in this process already', stderr)

    def test_values_made_counts_pythons_values(self):
        from multiprom._writer_install import values_made
        os.environ['PROMETHEUS_MULTIPROC_DIR'] = self.directory
        try:
            # prometheus_client's own factory (nothing installed the writer
            # in this process).
            self.assertEqual(values.MultiProcessValue.__module__, 'prometheus_client.values')
            cls = values.MultiProcessValue(lambda: 5)
            self.assertEqual(values_made(cls), 0)
            cls('counter', 'a', 'a_total', (), (), 'h')
            cls('gauge', 'b', 'b', ('x',), ('1',), 'h', multiprocess_mode='max')
            self.assertEqual(values_made(cls), 2)
            if CLOSES_FILES:
                cls.close_all_files()
                self.assertEqual(values_made(cls), 0)
            self.assertIsNone(values_made(values.MutexValue))
            self.assertIsNone(values_made(multiprom.MultiProcessValue(lambda: 6)))
        finally:
            close_files()
            del os.environ['PROMETHEUS_MULTIPROC_DIR']

    @unittest.skipUnless(CLOSES_FILES, 'prometheus_client has no '
                         'values.close_all_multiprocess_files() (before 0.26)')
    def test_close_all_multiprocess_files_closes_multiprom_files(self):
        os.environ['PROMETHEUS_MULTIPROC_DIR'] = self.directory
        try:
            cls = multiprom.MultiProcessValue(lambda: 8)
            first = cls('counter', 'a', 'a_total', (), (), 'h')
            first.inc(3)
            values.close_all_multiprocess_files()
            # Still readable, no longer writable (Python's raises too).
            self.assertEqual(first.get(), 3.0)
            with self.assertRaises(ValueError):
                first.inc(1)
            # A new value opens the file again and continues it.
            again = cls('counter', 'a', 'a_total', (), (), 'h')
            self.assertEqual(again.get(), 3.0)
            again.inc(1)
            self.assertEqual(again.get(), 4.0)
        finally:
            values.close_all_multiprocess_files()
            del os.environ['PROMETHEUS_MULTIPROC_DIR']

    def test_constructor_errors_are_pythons(self):
        missing = os.path.join(self.directory, 'missing')
        for env in ({'PROMETHEUS_MULTIPROC_DIR': missing}, {}):
            kinds = []
            for factory in (values.MultiProcessValue, multiprom.MultiProcessValue):
                saved = os.environ.pop('PROMETHEUS_MULTIPROC_DIR', None)
                os.environ.update(env)
                try:
                    cls = factory(lambda: 9)
                    cls('counter', 'a', 'a_total', (), (), 'h')
                    kinds.append(None)
                except Exception as error:  # the class of error is the point
                    kinds.append(type(error))
                finally:
                    close_files()
                    os.environ.pop('PROMETHEUS_MULTIPROC_DIR', None)
                    if saved is not None:
                        os.environ['PROMETHEUS_MULTIPROC_DIR'] = saved
            self.assertIsNotNone(kinds[0], env)
            self.assertEqual(kinds[0], kinds[1], env)

    def test_startup_features(self):
        from multiprom._startup import features
        cases = {
            '1': ({'collector'}, []),
            'TRUE': ({'collector'}, []),
            'yes': ({'collector'}, []),
            '0': (set(), []),
            'off': (set(), []),
            'collector': ({'collector'}, []),
            'writer': ({'writer'}, []),
            'collector,writer': ({'collector', 'writer'}, []),
            ' Writer , collector ,': ({'collector', 'writer'}, []),
            'writer,bogus,Other': ({'writer'}, ['bogus', 'other']),
            'bogus': (set(), ['bogus']),
        }
        for setting, expected in cases.items():
            self.assertEqual(features(setting), expected, setting)

    def test_startup_hook_installs_the_writer(self):
        env = {'PROMETHEUS_MULTIPROC_DIR': self.directory}
        expected = {
            'collector,writer': 'True multiprom._values multiprom',
            'writer': 'True multiprom._values prometheus_client.multiprocess',
            'collector': 'False prometheus_client.values multiprom',
            '1': 'False prometheus_client.values multiprom',
        }
        for setting, first_line in expected.items():
            lines, stderr = run_python(SHOW_WRITER, dict(env, MULTIPROM_INSTALL=setting),
                                       split=False)
            self.assertEqual(lines.splitlines()[0], first_line, setting)
            self.assertNotIn('Warning', stderr, setting)

    def test_startup_hook_warns_of_unknown_features(self):
        lines, stderr = run_python(SHOW_WRITER, {'PROMETHEUS_MULTIPROC_DIR': self.directory,
                                                 'MULTIPROM_INSTALL': 'writer,colector'},
                                   split=False)
        # The known one installed, the application started.
        self.assertEqual(lines.splitlines()[0],
                         'True multiprom._values prometheus_client.multiprocess')
        self.assertIn('RuntimeWarning', stderr)
        self.assertIn("'colector'", stderr)


if __name__ == '__main__':
    # The tests skipped for what the release lacks, one per line on stdout:
    # the caller holds the list each release must give.
    run = unittest.main(verbosity=2, exit=False)
    for test, _ in run.result.skipped:
        print('skipped', test.id().removeprefix('__main__.'))
    sys.exit(not run.result.wasSuccessful())
