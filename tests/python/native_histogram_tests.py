"""The multiprom package's native histograms, beyond what the files show
(tests/integration/python_native_histograms.rs with the pinned prometheus_client;
python_package_releases.rs with older ones).

usage: native_histogram_tests.py   (unittest; exits non-zero if a test fails;
                                    prints each skipped test's name)

Single-process mode leaves prometheus_client as it is; NativeHistogram's
classic part is the +Inf bucket alone, its children inherit its settings,
and it refuses settings out of range; a directory where the native file
cannot be made costs the native data only, with one warning;
prometheus_client's close_all_multiprocess_files() closes the native files
too, so a directory removed and made again gets them afresh.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from prometheus_client import values

# What the installed prometheus_client has that an older release the
# package allows lacks (tests/integration runs this script against several).
CLOSES_FILES = hasattr(values, 'close_all_multiprocess_files')

# Bounds every subprocess: a failing test fails, never hangs.
PATIENCE = 60

# What Prometheus 3.0 sends with native histograms on: every range names the
# escaping scheme, protobuf's too.
PROMETHEUS_3_0_NATIVE_ACCEPT = (
    'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;'
    'escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;'
    'q=0.5,application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.4,'
    'text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;'
    'escaping=allow-utf-8;q=0.2,*/*;q=0.1')

# What Prometheus 3 (3.5) sends with native histograms on.
PROMETHEUS_NATIVE_ACCEPT = (
    'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;'
    'q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,'
    'application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;'
    'escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1')


def run_python(code, env):
    """`code` in a fresh interpreter of this venv: (stdout lines, stderr)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ('MULTIPROM_INSTALL', 'PROMETHEUS_MULTIPROC_DIR')}
    full_env.update(env)
    out = subprocess.run([sys.executable, '-c', code], env=full_env, capture_output=True,
                         text=True, timeout=PATIENCE)
    if out.returncode != 0:
        raise AssertionError(f'python -c failed ({out.returncode}):\n{out.stderr}')
    return out.stdout.splitlines(), out.stderr


class NativeHistogramTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix='multiprom-native-')

    def tearDown(self):
        shutil.rmtree(self.directory)

    def test_single_process_mode_is_left_alone(self):
        lines, stderr = run_python(
            'import multiprom; multiprom.install(collector=False, native_histograms=True); '
            'from prometheus_client import Histogram, REGISTRY; '
            'h = Histogram("h", "H."); h.observe(2); '
            'n = multiprom.NativeHistogram("n", "N."); n.observe(3); '
            'print(Histogram.observe.__module__, hasattr(Histogram.observe, "__wrapped__")); '
            'print(REGISTRY.get_sample_value("h_sum"), REGISTRY.get_sample_value("n_count"))',
            {})
        self.assertEqual(lines, ['prometheus_client.metrics False', '2.0 1.0'])
        self.assertEqual(stderr, '')

    def test_opt_in_wraps_observe_once(self):
        lines, _ = run_python(
            'import multiprom; multiprom.install(collector=False, native_histograms=True); '
            'multiprom.install(collector=False, native_histograms=True); '
            'from prometheus_client import Histogram; '
            'multiprom.install(collector=False, native_histograms=True); '
            'print(Histogram.observe.__wrapped__.__module__, '
            'hasattr(Histogram.observe.__wrapped__, "__wrapped__"))',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(lines, ['prometheus_client.metrics False'])

    def test_writer_records_natively_in_the_sums_call(self):
        # With multiprom's writer the native observation rides on _sum.inc;
        # a subclass's own observe is still called.
        lines, stderr = run_python(
            'import multiprom; multiprom.install(collector=False, writer=True, '
            'native_histograms=True); '
            'from prometheus_client import Histogram, CollectorRegistry; '
            'from prometheus_client.multiprocess import MultiProcessCollector\n'
            'class Counted(Histogram):\n'
            '    calls = 0\n'
            '    def observe(self, amount, exemplar=None):\n'
            '        Counted.calls += 1; super().observe(amount, exemplar)\n'
            '\nh = Histogram("h", "H.", ["k"]).labels("a"); c = Counted("c", "C."); '
            'h.observe(1); c.observe(2); c.observe(3); '
            'print(type(h._sum).__name__, type(c._sum).__name__, Counted.calls); '
            'r = CollectorRegistry(); MultiProcessCollector(r); '
            'print(r.get_sample_value("h_sum", {"k": "a"}), r.get_sample_value("c_sum"))',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(lines, ['NativeSum MmapedValue 2', '1.0 5.0'])
        self.assertEqual(stderr, '')

    def native_counts(self):
        """{label values: native count} of every native series in the
        directory, from `multiprom inspect --json`."""
        out = subprocess.run([sys.executable, '-m', 'multiprom', 'inspect', '--json',
                              self.directory], capture_output=True, text=True, check=True,
                             timeout=PATIENCE).stdout
        counts = {}
        for line in out.splitlines():
            entry = json.loads(line)
            if 'native_histogram' in entry:
                key = tuple(sorted(entry['labels'].values()))
                counts[key] = counts.get(key, 0) + entry['native_histogram']['count']
        return counts

    def test_an_observation_prometheus_client_counts_is_counted_natively(self):
        # prometheus_client counts an observation, then refuses its exemplar
        # (over 128 characters) with ValueError: the native histogram counts
        # it too, with either value class, as the classic one does. A
        # labelled histogram's parent refuses before counting: neither does.
        code = (
            'import multiprom\n'
            'multiprom.install(collector=False, writer=WRITER, native_histograms=True)\n'
            'from prometheus_client import Histogram\n'
            'h = Histogram("h", "H.", ["k"])\n'
            'for observe in (lambda: h.labels("a").observe(0.5, exemplar={"e": "x" * 200}),\n'
            '                lambda: h.observe(0.5, exemplar={"e": "x"})):\n'
            '    try:\n'
            '        observe()\n'
            '    except ValueError:\n'
            '        print("refused")\n'
            'h.labels("a").observe(0.25)\n')
        for writer in (False, True):
            lines, stderr = run_python(code.replace('WRITER', str(writer)),
                                       {'PROMETHEUS_MULTIPROC_DIR': self.directory})
            self.assertEqual(lines, ['refused', 'refused'], stderr)
            self.assertEqual(self.native_counts(), {('a',): 2}, f'writer={writer}')
            shutil.rmtree(self.directory)
            os.mkdir(self.directory)

    def test_a_label_that_is_not_utf8_is_recorded_natively(self):
        # A label value decoded with 'surrogateescape' (bytes that are not
        # UTF-8): the native series' key is prometheus_client's, escaped, for
        # a Histogram under the opt-in and for a NativeHistogram.
        code = (
            'import os, multiprom\n'
            'multiprom.install(collector=False, native_histograms=True)\n'
            'from prometheus_client import Histogram\n'
            'path = os.fsdecode(b"/caf\\xe9")\n'
            'Histogram("h", "H.", ["path"]).labels(path).observe(0.5)\n'
            'multiprom.NativeHistogram("n", "N.", ["path"]).labels(path).observe(2)\n')
        lines, stderr = run_python(code, {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(stderr, '')
        self.assertEqual(self.native_counts(), {('/caf\ufffd',): 2})

    def test_native_histogram_classic_part_and_children(self):
        lines, stderr = run_python(
            'import multiprom; from prometheus_client import CollectorRegistry; '
            'r = CollectorRegistry(); '
            'n = multiprom.NativeHistogram("n", "N.", ["k"], registry=r, schema=0, '
            'max_buckets=20, zero_threshold=0.001); '
            'c = n.labels("a"); c.observe(3); '
            'print(type(c).__name__, c._multiprom_settings, c._upper_bounds); '
            'print(" ".join(sorted(s.name + str(s.labels) for s in list(r.collect())[0].samples '
            'if not s.name.endswith("_created"))))',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(lines, [
            'NativeHistogram (0, 20, 0.001) [inf]',
            "n_bucket{'k': 'a', 'le': '+Inf'} n_count{'k': 'a'} n_sum{'k': 'a'}"])
        self.assertEqual(stderr, '')

    def test_bad_settings_in_the_environment_never_raise(self):
        # Even where warnings are errors (-W error): the setting is not used,
        # said on stderr, and the metric made; the start-up hook installs
        # the features it knows.
        lines, stderr = run_python(
            'import multiprom\n'
            'n = multiprom.NativeHistogram("n", "N.")\n'
            'n.observe(1)\n'
            'print(n._multiprom_settings[0])\n'
            'from prometheus_client.multiprocess import MultiProcessCollector\n'
            'print(MultiProcessCollector.__module__)\n',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory, 'PYTHONWARNINGS': 'error',
             'MULTIPROM_NATIVE_HISTOGRAM_SCHEMA': '9', 'MULTIPROM_INSTALL': 'collector,bogus'})
        self.assertEqual(lines, ['3', 'multiprom'], stderr)
        self.assertIn("MULTIPROM_INSTALL names unknown features 'bogus'", stderr)
        self.assertIn('MULTIPROM_NATIVE_HISTOGRAM_SCHEMA=', stderr)

    def test_native_histogram_refuses_settings_out_of_range(self):
        import multiprom

        for settings in ({'schema': 9}, {'schema': -5}, {'schema': 2.0}, {'max_buckets': 0},
                         {'max_buckets': 70000}, {'zero_threshold': -1},
                         {'zero_threshold': math.inf}):
            with self.assertRaises(ValueError, msg=settings):
                multiprom.NativeHistogram('bad', 'Bad.', registry=None, **settings)

    def test_unwritable_native_directory_warns_once_and_keeps_the_classic(self):
        # A file where the native files' directory should be.
        open(os.path.join(self.directory, 'native-histograms'), 'w').close()
        lines, stderr = run_python(
            'import multiprom; multiprom.install(collector=False, native_histograms=True); '
            'from prometheus_client import Histogram, CollectorRegistry; '
            'from prometheus_client.multiprocess import MultiProcessCollector; '
            'a = Histogram("a", "A."); b = Histogram("b", "B.", ["x"]); '
            'a.observe(1); a.observe(2); b.labels("y").observe(4); '
            'r = CollectorRegistry(); MultiProcessCollector(r); '
            'print(r.get_sample_value("a_sum"), r.get_sample_value("b_count", {"x": "y"}))',
            {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(lines, ['3.0 1.0'])
        self.assertEqual(stderr.count('native histogram observations are being dropped'), 1,
                         stderr)

    @unittest.skipUnless(CLOSES_FILES, 'prometheus_client has no '
                         'values.close_all_multiprocess_files() (before 0.26)')
    def test_close_all_multiprocess_files_closes_the_native_files_too(self):
        # What a test suite does between tests: close, remove the directory,
        # make it again. The next histograms' native observations belong in
        # the new directory, not in the removed file; twice, since
        # prometheus_client forgets its cleanups when it runs them.
        code = (
            'import os, shutil, multiprom; '
            'multiprom.install(collector=False, writer={writer}, native_histograms=True)\n'
            'from prometheus_client import CollectorRegistry, Histogram\n'
            'from prometheus_client.values import close_all_multiprocess_files\n'
            'd = os.environ["PROMETHEUS_MULTIPROC_DIR"]\n'
            'native = os.path.join(d, "native-histograms", f"histogram_{{os.getpid()}}.native")\n'
            'for name in ("a", "b", "c"):\n'
            '    Histogram(name, "H.", registry=CollectorRegistry()).observe(1)\n'
            '    with open(native, "rb") as f: data = f.read()\n'
            '    print(name, f\'["{{name}}", "{{name}}", {{{{}}}}, "H."]\'.encode() in data)\n'
            '    close_all_multiprocess_files(); shutil.rmtree(d); os.mkdir(d)\n')
        for writer in (False, True):
            lines, stderr = run_python(code.format(writer=writer),
                                       {'PROMETHEUS_MULTIPROC_DIR': self.directory})
            self.assertEqual(lines, ['a True', 'b True', 'c True'], f'writer={writer}')
            self.assertEqual(stderr, '', f'writer={writer}')

    def test_app_endpoint_escapes_protobuf_names_as_asked(self):
        # The protobuf answer escapes names as the protobuf range's `escaping` asks: Prometheus
        # 3.0 names allow-utf-8 there, and gets names as they are (as client_golang serves
        # them), with the scheme named in the Content-Type; Prometheus 3.5 names none there,
        # and gets underscores. The bytes are `multiprom scrape --format protobuf --escaping`'s.
        # Releases before 0.22 refuse a name that is not a legacy one: then only the bytes
        # and the Content-Type are checked.
        code = (
            'import subprocess, sys, multiprom\n'
            'multiprom.install(native_histograms=True)\n'
            'from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app\n'
            'from prometheus_client.multiprocess import MultiProcessCollector\n'
            'Histogram("lat", "Latency.").observe(0.3)\n'
            'try:\n'
            '    Counter("caf\\u00e9.orders", "Orders.").inc()\n'
            '    utf8 = True\n'
            'except ValueError:\n'
            '    utf8 = False\n'
            'registry = CollectorRegistry(); MultiProcessCollector(registry)\n'
            'for accept, escaping in ((V30, "allow-utf-8"), (V35, "underscores")):\n'
            '    said = []\n'
            '    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "",\n'
            '               "HTTP_ACCEPT": accept}\n'
            '    body = b"".join(make_wsgi_app(registry)(environ, lambda s, h: said.append(dict(h))))\n'
            '    scraped = subprocess.run([sys.executable, "-m", "multiprom", "scrape", "--format",\n'
            '                              "protobuf", "--escaping", escaping],\n'
            '                             capture_output=True, check=True).stdout\n'
            '    kept = "caf\\u00e9.orders_total".encode() in body\n'
            '    escaped = b"caf__orders_total" in body\n'
            '    print(said[0]["Content-Type"], body == scraped,\n'
            '          kept == (utf8 and escaping == "allow-utf-8"),\n'
            '          escaped == (utf8 and escaping == "underscores"))\n'
            ).replace('V30', repr(PROMETHEUS_3_0_NATIVE_ACCEPT)).replace(
                'V35', repr(PROMETHEUS_NATIVE_ACCEPT))
        protobuf = ('application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; '
                    'encoding=delimited')
        lines, stderr = run_python(code, {'PROMETHEUS_MULTIPROC_DIR': self.directory})
        self.assertEqual(lines, [f'{protobuf}; escaping=allow-utf-8 True True True',
                                 f'{protobuf} True True True'], stderr)
        self.assertEqual(stderr, '')

    def test_app_endpoint_serves_protobuf_with_native_histograms(self):
        # prometheus_client's own /metrics (make_wsgi_app, and make_asgi_app, over a registry of
        # multiprom's collector): to a scraper preferring protobuf, as
        # Prometheus with native histograms on, the bytes of `multiprom
        # scrape --format protobuf` (gzipped when asked; a `name[]` scrape
        # the part of them so named); text to other scrapers (what
        # prometheus_client answers, for Prometheus's header OpenMetrics), and also to it
        # while the directory has no native histogram (the text carries
        # everything then) or the registry holds another collector (then
        # prometheus_client's own choice, OpenMetrics for this header).
        code = (
            'import gzip, subprocess, sys, multiprom\n'
            'multiprom.install(native_histograms=NATIVE)\n'
            'from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app\n'
            'from prometheus_client.multiprocess import MultiProcessCollector\n'
            'Histogram("lat", "Latency.", ["route"]).labels("/").observe(0.3)\n'
            'Counter("reqs", "Requests.").inc()\n'
            'only = CollectorRegistry(); MultiProcessCollector(only)\n'
            'mixed = CollectorRegistry(); MultiProcessCollector(mixed)\n'
            'Counter("own", "Own.", registry=mixed)\n'
            'def get(registry, accept, query="", encoding=""):\n'
            '    said = []\n'
            '    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": query,\n'
            '               "HTTP_ACCEPT": accept, "HTTP_ACCEPT_ENCODING": encoding}\n'
            '    body = b"".join(make_wsgi_app(registry)(environ, lambda s, h: said.append(dict(h))))\n'
            '    zipped = said[0].get("Content-Encoding") == "gzip"\n'
            '    return said[0]["Content-Type"].split(";")[0], zipped, gzip.decompress(body) if zipped else body\n'
            'def scrape(*args):\n'
            '    return subprocess.run([sys.executable, "-m", "multiprom", "scrape", *args],\n'
            '                          capture_output=True, check=True).stdout\n'
            'formats = {"application/vnd.google.protobuf": "protobuf", "text/plain": "prometheus",\n'
            '           "application/openmetrics-text": "openmetrics"}\n'
            'def same(answer):\n'
            '    kind, zipped, body = answer\n'
            '    whole = scrape("--format", formats[kind])\n'
            # A part: its families are where the whole has them, then # EOF.
            '    part = body[:-len(b"# EOF\\n")] if body.endswith(b"# EOF\\n") else body\n'
            '    return kind, zipped, body == whole, part in whole\n'
            f'native = {PROMETHEUS_NATIVE_ACCEPT!r}\n'
            'print(*same(get(only, native)))\n'
            'print(*same(get(only, native, encoding="gzip")))\n'
            'print(*same(get(only, native, "name[]=lat_bucket&name[]=lat_count&name[]=lat_sum")))\n'
            'print(*same(get(only, "text/plain;version=0.0.4")))\n'
            'print(get(mixed, native)[0])\n'
            # make_asgi_app (vLLM's) answers through the same function.
            'import asyncio\n'
            'from prometheus_client import make_asgi_app\n'
            'async def asgi_get(accept):\n'
            '    sent = []\n'
            '    async def receive(): return {"type": "http.request"}\n'
            '    async def send(message): sent.append(message)\n'
            '    scope = {"type": "http", "query_string": b"", "headers": [(b"accept", accept.encode())]}\n'
            '    await make_asgi_app(only)(scope, receive, send)\n'
            '    headers = {name.lower(): value for name, value in sent[0]["headers"]}\n'
            '    kind = headers[b"content-type"].decode().split(";")[0]\n'
            '    return kind, False, sent[1]["body"]\n'
            'print(*same(asyncio.run(asgi_get(native))))\n')
        protobuf, openmetrics = 'application/vnd.google.protobuf', 'application/openmetrics-text'
        for native, expected in (
                (True, [f'{protobuf} False True True', f'{protobuf} True True True',
                        f'{protobuf} False False True', 'text/plain False True True',
                        'application/openmetrics-text', f'{protobuf} False True True']),
                (False, [f'{openmetrics} False True True', f'{openmetrics} True True True',
                         f'{openmetrics} False False True', 'text/plain False True True',
                         openmetrics, f'{openmetrics} False True True'])):
            lines, stderr = run_python(code.replace('NATIVE', str(native)),
                                       {'PROMETHEUS_MULTIPROC_DIR': self.directory})
            self.assertEqual(lines, expected, f'native={native}\n{stderr}')
            self.assertEqual(stderr, '', f'native={native}')
            shutil.rmtree(self.directory)
            os.mkdir(self.directory)

    def test_native_files_are_named_with_a_custom_process_identifier(self):
        # The collector pairs a native file with the *.db file of its name:
        # with a value class whose process identifier is not os.getpid, the
        # native file takes the identifier's answer too, and is served.
        code = (
            'import os, multiprom; multiprom.install(collector=False, writer=WRITER, '
            'native_histograms=True)\n'
            'from prometheus_client import Histogram, values\n'
            'values.ValueClass = values.MultiProcessValue(lambda: "w7")\n'
            'Histogram("h", "H.").observe(0.3)\n'
            'd = os.environ["PROMETHEUS_MULTIPROC_DIR"]\n'
            'print(sorted(os.listdir(d)), os.listdir(os.path.join(d, "native-histograms")))\n'
            f'body, _, _ = multiprom._native.DirCollector(d).expose_protobuf({PROMETHEUS_NATIVE_ACCEPT!r})\n'
            'print(body is not None)\n')
        for writer in (False, True):
            lines, stderr = run_python(code.replace('WRITER', str(writer)),
                                       {'PROMETHEUS_MULTIPROC_DIR': self.directory})
            self.assertEqual(lines, ["['histogram_w7.db', 'native-histograms'] "
                                     "['histogram_w7.native']", 'True'], f'writer={writer}')
            self.assertEqual(stderr, '', f'writer={writer}')
            shutil.rmtree(self.directory)
            os.mkdir(self.directory)

    def test_startup_feature(self):
        from multiprom._startup import features

        self.assertEqual(features('collector,native-histograms'),
                         ({'collector', 'native-histograms'}, []))
        self.assertEqual(features('native-histogram'), (set(), ['native-histogram']))


if __name__ == '__main__':
    # The tests skipped for what the release lacks, one per line on stdout:
    # the caller holds the list each release must give.
    run = unittest.main(verbosity=2, exit=False)
    for test, _ in run.result.skipped:
        print('skipped', test.id().removeprefix('__main__.'))
    sys.exit(not run.result.wasSuccessful())
