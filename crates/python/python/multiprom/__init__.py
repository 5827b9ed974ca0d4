"""A drop-in ``prometheus_client.multiprocess.MultiProcessCollector`` on
multiprom's Rust engine.

``multiprom.MultiProcessCollector(registry, path=None)`` takes the same
arguments, raises the same errors and returns the same ``Metric`` objects
as ``prometheus_client``'s, so ``generate_latest``, ``make_wsgi_app``,
``make_asgi_app`` and ``start_http_server`` work unchanged. It differs in
what it does not do: it keeps what it parsed between scrapes (an unchanged
file is not parsed again), reads and merges without holding the GIL, and
never fails a scrape because of one file. Collectors of one directory
share what was parsed, so a new collector per request (as in
``prometheus_client``'s multiprocess recipe) costs a warm scrape. A
damaged, foreign or vanished file is skipped and reported, once, through
the ``logging`` logger ``"multiprom"``; the other files are merged as if
it were not there.

Use it in code::

    from prometheus_client import CollectorRegistry, generate_latest
    import multiprom

    registry = CollectorRegistry()
    multiprom.MultiProcessCollector(registry)
    generate_latest(registry)

or swap it in for everyone who uses ``prometheus_client.multiprocess``::

    multiprom.install()

or, for an application you cannot edit, set ``MULTIPROM_INSTALL=1`` in its
environment: the wheel's ``multiprom.pth`` runs ``install()`` at interpreter
start.

The writing side has a drop-in too: ``multiprom.MultiProcessValue()`` is
``prometheus_client.values.MultiProcessValue()``'s value class on
multiprom's Rust writer (same files, same bytes, several times faster per
update). ``multiprom.install(writer=True)`` (or
``MULTIPROM_INSTALL=collector,writer``) makes it the value class of
``prometheus_client``'s metrics.

Native histograms: ``multiprom.install(native_histograms=True)`` (or
``native-histograms`` in ``MULTIPROM_INSTALL``) makes every
``prometheus_client`` ``Histogram`` also record each observation as a
Prometheus native histogram, in files beside the ``*.db`` files, which
stay as they are; ``multiprom.NativeHistogram`` is a histogram recorded
natively only.

Importing this package does not import ``prometheus_client``: applications
that set ``PROMETHEUS_MULTIPROC_DIR`` before importing ``prometheus_client``
(it reads the variable when first imported) keep working with ``install()``
called first.
"""

import glob
import logging
import os
import sys
import threading
import warnings

from multiprom import _native
from multiprom._values import MultiProcessValue

__all__ = ["MultiProcessCollector", "MultiProcessValue", "NativeHistogram", "install",
           "install_native_histograms", "install_writer"]

# The version of this build; the `multiprom` command (`multiprom --version`)
# is the same build.
__version__ = _native.__version__

_logger = logging.getLogger("multiprom")

# The module whose MultiProcessCollector install() replaces.
_TARGET = "prometheus_client.multiprocess"


# One engine per directory, shared by every collector of that directory in
# this process. prometheus_client's own multiprocess recipe builds a new
# registry and collector on every request; with a shared engine only the
# process's first scrape parses the files, later ones find them parsed.
_engines = {}
_engines_lock = threading.Lock()
# Engines a forked child inherited: kept, never used. Another thread of the
# parent may have been inside one of them at the fork, holding its locks,
# which no thread of the child will ever release; dropping them is not
# safe either.
_inherited = []


def _engine(path):
    with _engines_lock:
        engine = _engines.get(path)
        if engine is None:
            engine = _engines[path] = _native.DirCollector(path)
        return engine


def _forget_engines_in_child():
    global _engines, _engines_lock
    _inherited.append(_engines)
    _engines = {}
    _engines_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_engines_in_child)


def _log(reports):
    for level, message in reports:
        _logger.log(level, "%s", message)


# prometheus_client's own class, as install() found it in the module.
_python_collector = None


def _python_class():
    """prometheus_client's MultiProcessCollector, if it is imported."""
    if _python_collector is not None:
        return _python_collector
    module = sys.modules.get(_TARGET)
    found = getattr(module, "MultiProcessCollector", None)
    if found is None or isinstance(found, _PythonHelpers):
        return None
    return found


class _PythonHelpers(type):
    """The metaclass of multiprom's class: a class attribute it does not
    define (``_read_metrics``, ``_accumulate_metrics``, ...) is
    prometheus_client's own.

    prometheus_client's ``merge()`` finds its helpers through its module
    (``MultiProcessCollector._read_metrics(files)``). Once ``install()`` has
    put multiprom's class there, a prometheus_client class that code bound
    earlier (``prometheus_flask_exporter.multiprocess`` does so when
    imported), or a subclass of it, still runs prometheus_client's
    ``merge()``, which then looks its helpers up on multiprom's class."""

    def __getattr__(cls, name):
        python = None if name.startswith("__") else _python_class()
        if python is not None:
            try:
                return getattr(python, name)
            except AttributeError:
                pass
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


class MultiProcessCollector(metaclass=_PythonHelpers):
    """Collector for files for multi-process mode, on multiprom's engine.

    Same constructor and errors as
    ``prometheus_client.multiprocess.MultiProcessCollector``: ``path``
    defaults to ``PROMETHEUS_MULTIPROC_DIR`` (or, with a
    ``DeprecationWarning``, the legacy lowercase ``prometheus_multiproc_dir``),
    and a missing or non-directory path raises ``ValueError``. The collector
    registers itself with ``registry`` unless it is ``None``.

    The first collector made (or ``install()``) also adapts
    ``prometheus_client``: its ``generate_latest`` functions (text and
    OpenMetrics, which ``make_wsgi_app``, ``make_asgi_app`` and
    ``start_http_server`` call) encode in Rust for a registry whose only
    collector is a multiprom collector, byte for byte what
    ``prometheus_client`` prints, and run as before for any other registry;
    and its restricted registries (``GET /metrics?name[]=...``) include
    multiprom collectors.
    """

    def __init__(self, registry, path=None):
        if path is None:
            # multiprom's one rule for the variable (prometheus_client's),
            # with prometheus_client's side effects for the legacy name.
            variable, path = _native.dir_from_env()
            if variable == 'prometheus_multiproc_dir':
                os.environ['PROMETHEUS_MULTIPROC_DIR'] = os.environ['prometheus_multiproc_dir']
                warnings.warn("prometheus_multiproc_dir variable has been deprecated in favor of the upper case naming PROMETHEUS_MULTIPROC_DIR", DeprecationWarning)
        if not path or not os.path.isdir(path):
            raise ValueError('env PROMETHEUS_MULTIPROC_DIR is not set or not a directory')
        self._path = path
        # Made now, so the first scrape finds the files parsed.
        _engine(path)
        _adopt()
        if registry:
            registry.register(self)

    @property
    def _engine(self):
        # This process's engine: one made before a fork is the parent's.
        return _engine(self._path)

    @staticmethod
    def merge(files, accumulate=True):
        """Merge metrics from the given files: a list of ``Metric``.

        ``accumulate=False`` keeps histogram buckets per bucket (no
        ``_count``), for writing merged data back into files. Files are
        merged in the order given, as Python's ``merge`` does; files that do not exist or are damaged are
        skipped and logged, never raised.
        """
        metrics, reports = _native.merge([os.fspath(f) for f in files], accumulate)
        _log(reports)
        return metrics

    def collect(self):
        """The directory's ``*.db`` files, merged: a list of ``Metric``."""
        if type(self).merge is not MultiProcessCollector.merge:
            # A subclass's own merge() (one that filters the files, say):
            # call it as prometheus_client's collect() does.
            return self.merge(glob.glob(os.path.join(self._path, "*.db")), accumulate=True)
        metrics, reports = self._engine.collect()
        _log(reports)
        return metrics

    def _collect_only(self, names):
        """``collect()`` with only the samples named ``names`` (a set of
        ``str``), as ``prometheus_client``'s restricted registry keeps them:
        only the entries feeding them are read and merged."""
        metrics, reports = self._engine.collect(names)
        _log(reports)
        return metrics


# Whether prometheus_client has been adapted to multiprom collectors (or
# will be when imported).
_adopted = False


def _adopt():
    """What every multiprom collector needs from ``prometheus_client``:
    restricted registries (``GET /metrics?name[]=...``) that include it, and
    ``generate_latest`` engine-encoded for a registry holding only it
    (unless ``install(exposition=False)`` said otherwise). Done once, by the
    first collector or ``install()``, never importing ``prometheus_client``
    itself."""
    global _adopted
    if _adopted:
        return
    _adopted = True
    from multiprom import _exposition, _restricted

    _on_import("prometheus_client.registry", _restricted.patch)
    _on_import("prometheus_client.exposition", _exposition.patch)


def install(exposition=True, *, writer=False, collector=True, native_histograms=False):
    """Make ``prometheus_client.multiprocess.MultiProcessCollector`` this
    package's class (``collector=False``: leave it) and, with
    ``writer=True``, make ``prometheus_client``'s metrics write their files
    through multiprom (see ``install_writer``); with
    ``native_histograms=True``, make every ``prometheus_client``
    ``Histogram`` record natively too (see ``install_native_histograms``).

    If ``prometheus_client.multiprocess`` is imported already, it is patched
    now; otherwise it is patched the moment it is imported (``install()``
    itself never imports ``prometheus_client``). Code that already did
    ``from prometheus_client.multiprocess import MultiProcessCollector``
    keeps prometheus_client's class, which keeps working: call
    ``install()`` before importing such code to have it use multiprom's.

    ``prometheus_client``'s ``generate_latest`` functions are engine-encoded
    for registries holding only a multiprom collector, as soon as a
    multiprom collector is made (see ``MultiProcessCollector``).
    ``exposition=False`` leaves them (or puts them back) as they are, for
    collectors made before and after.
    """
    if writer:
        install_writer()
    if native_histograms:
        install_native_histograms()
    if not collector:
        return
    from multiprom import _exposition

    _exposition.set_wanted(exposition)
    _on_import(_TARGET, _replace_collector)
    _adopt()


def install_writer():
    """Make ``prometheus_client`` write its multiprocess files through
    multiprom: ``prometheus_client.values.MultiProcessValue`` becomes
    ``multiprom.MultiProcessValue`` and, if ``prometheus_client.values.ValueClass``
    is ``prometheus_client``'s multiprocess class, it becomes multiprom's
    (with the same process identifier). Metrics made from then on write
    through multiprom; the files are the ones ``prometheus_client`` writes,
    byte for byte, so every reader reads them as before.

    Done now if ``prometheus_client.values`` is imported, else the moment
    it is (which is when it decides, from ``PROMETHEUS_MULTIPROC_DIR``,
    whether to run in multiprocess mode). If ``prometheus_client``'s class
    has already made values in this process, it is kept, with a
    ``RuntimeWarning``: two writers of one file would overwrite each
    other's entries.
    """
    from multiprom import _writer_install

    _on_import("prometheus_client.values", _writer_install.patch)


def install_native_histograms():
    """Make every ``prometheus_client`` ``Histogram`` (made before or after,
    labelled children and ``time()`` included) also record each
    observation as a native histogram, in this process's
    ``native-histograms/histogram_<id>.native`` file in the multiprocess
    directory, with the schema ``MULTIPROM_NATIVE_HISTOGRAM_SCHEMA`` (default
    3) and at most ``MULTIPROM_NATIVE_HISTOGRAM_MAX_BUCKETS`` buckets (default
    160). The classic buckets and ``*.db`` files stay exactly as they are.

    Done now if ``prometheus_client.metrics`` is imported, else the moment it
    is. In single-process mode (no ``PROMETHEUS_MULTIPROC_DIR`` when
    ``prometheus_client`` was imported) it does nothing. A native failure is
    logged once and never fails an observation.
    """
    from multiprom import _native_install

    _on_import("prometheus_client.metrics", _native_install.patch)


def __getattr__(name):
    # NativeHistogram subclasses prometheus_client's Histogram: imported on
    # first use, so importing multiprom does not import prometheus_client.
    if name == "NativeHistogram":
        from multiprom._native_histogram import NativeHistogram

        return NativeHistogram
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _on_import(name, patch):
    """``patch(module)`` now if ``name`` is imported, else when it is."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
        return
    from multiprom import _import_hook

    _import_hook.patch_on_import(name, patch)


def _replace_collector(module):
    global _python_collector
    if not isinstance(module.MultiProcessCollector, _PythonHelpers):
        _python_collector = module.MultiProcessCollector
    module.MultiProcessCollector = MultiProcessCollector
