"""Recording a prometheus_client ``Histogram``'s observations natively
too: the ``observe`` and ``_metric_init`` wrappers shared by the opt-in
(``install(native_histograms=True)``, which puts them on
``prometheus_client``'s ``Histogram``) and by ``multiprom.NativeHistogram``.

Each observable histogram (a label-less one, or a labelled one's child)
gets a ``_multiprom_native`` attribute: the bound ``observe`` of its
``_native.NativeSeries``, or a function that does nothing (single-process
mode, or a failure). The wrapped ``observe`` runs the classic one, then
calls that attribute: one call, no test. Histograms made before the
wrappers were put on find the class attribute instead, ``bind_lazily``,
which makes their series on their first observation.

With multiprom's writer, a histogram made while the wrappers are on skips
even that call: its ``_sum`` value becomes a ``_native.NativeSum``, which
records natively in the same Rust call that adds to the classic sum
(``observe`` calls ``_sum.inc(amount)`` once per observation), and its
``observe`` is prometheus_client's own again, bound on the instance.

Nothing here may fail an observation or a metric's creation: a failure is
warned of once and leaves the histogram classic only.
"""

import functools
import logging
import os
import types

from multiprom import _native, _native_settings

# The kinds of failure logged so far (see `_warn_once`), at most `_WARNED_KINDS`.
_warned = set()
_WARNED_KINDS = 16


def _nothing(amount):
    """What a histogram without a native series records natively."""


def recorder(metric):
    """The native recorder of ``metric`` (an observable histogram): its
    series' ``observe``, or ``_nothing``."""
    series = _series(metric)
    return _nothing if series is None else series.observe


def _series(metric):
    """The native series of ``metric``, or ``None``."""
    try:
        from prometheus_client import values

        if not getattr(values.ValueClass, "_multiprocess", False):
            # Single-process mode: no directory to record in.
            return None
        settings = getattr(metric, "_multiprom_settings", None)
        if settings is None:
            settings = _native_settings.from_env() + (None,)
        schema, max_buckets, zero_threshold = settings
        try:
            series = _native.NativeSeries(metric._name, metric._labelnames, metric._labelvalues,
                                          metric._documentation, schema, max_buckets,
                                          zero_threshold)
        except UnicodeEncodeError:
            # A label (or name, or help) with a lone surrogate (text decoded
            # with 'surrogateescape'): the key as prometheus_client makes it,
            # whose json.dumps escapes it.
            from prometheus_client.mmap_dict import mmap_key
            key = mmap_key(metric._name, metric._name, metric._labelnames,
                           metric._labelvalues, metric._documentation)
            series = _native.NativeSeries("", (), (), "", schema, max_buckets, zero_threshold,
                                          key=key)
        # Open now, so the series is native from its first scrape on; a
        # failure is logged by the extension and the series stays silent
        # until a fork gives it a new file to try.
        series.open()
        return series
    except Exception as error:  # never fail the application's metric
        _warn_once(error)
        return None


def bind_lazily(metric, amount):
    """The class attribute ``_multiprom_native``: the first observation of a
    histogram made before the wrappers were put on (or whose
    ``_metric_init`` did not run ours) makes its recorder."""
    native = metric._multiprom_native = recorder(metric)
    native(amount)


def with_native(classic_observe):
    """``observe`` recording natively after ``classic_observe``."""

    @functools.wraps(classic_observe)
    def observe(self, amount, exemplar=None):
        try:
            classic_observe(self, amount, exemplar)
        except ValueError:
            # prometheus_client checks an exemplar only after it has
            # counted the observation (in _sum and a bucket): a bad one is
            # counted natively too, so both count it, as with multiprom's
            # writer. Any other ValueError comes before counting (a
            # labelled histogram's parent).
            if exemplar and _observable(self):
                self._multiprom_native(amount)
            raise
        self._multiprom_native(amount)

    observe._multiprom_wrapper = True
    return observe


def _observable(metric):
    """Whether prometheus_client lets ``metric`` be observed (not the
    parent of labelled children)."""
    try:
        metric._raise_if_not_observable()
    except ValueError:
        return False
    return True


def with_native_init(classic_init):
    """``_metric_init`` making the native recorder after ``classic_init``
    made the classic values."""

    @functools.wraps(classic_init)
    def _metric_init(self):
        classic_init(self)
        series = _series(self)
        self._multiprom_native = _nothing if series is None else series.observe
        observe = type(self).observe
        # Only under our own wrapper: a subclass's observe stays in charge.
        if (series is not None and isinstance(self._sum, _native.Value)
                and getattr(observe, "_multiprom_wrapper", False)):
            try:
                self._sum = _native.NativeSum(self._sum, series)
                self._multiprom_native = _nothing
                self.observe = types.MethodType(observe.__wrapped__, self)
            except Exception as error:  # never fail the application's metric
                _warn_once(error)

    return _metric_init


def file_id():
    """What this process's histogram ``*.db`` file is named with
    (``histogram_<id>.db``), when the multiprocess value class's process
    identifier is not ``os.getpid``: its answer, as ``str.format`` writes it
    into the name; None for ``os.getpid`` (the extension asks the system)
    or a class whose identifier cannot be found. Called when a native file
    is opened (a series' first observation, or its first after a fork), so
    that the collector finds the native file beside its ``*.db`` file."""
    from prometheus_client import values

    from multiprom._writer_install import _closure_variable

    value_class = values.ValueClass
    # multiprom's writer keeps it on its class; prometheus_client's in the
    # closure MultiProcessValue() made the class in.
    identifier = getattr(value_class, "_multiprom_process_identifier", None)
    if identifier is None:
        identifier = _closure_variable(
            getattr(value_class, "_MmapedValue__check_for_pid_change", None),
            "process_identifier")
    if identifier is None or identifier is os.getpid:
        return None
    return "{}".format(identifier())


def classic(function):
    """prometheus_client's own function under our wrapper, if wrapped."""
    return getattr(function, "__wrapped__", function)


def _warn_once(error):
    """Logs that native histograms are not recorded, once per kind of
    failure (its type and message) in this process, for the first few kinds:
    one failure does not hide another, nor does a failure per series flood
    the log."""
    kind = f"{type(error).__name__}: {error}"
    if kind in _warned or len(_warned) >= _WARNED_KINDS:
        return
    _warned.add(kind)
    logging.getLogger("multiprom").warning(
        "native histograms are not recorded (%r); classic histograms are unaffected. "
        "Logged once per process and kind of failure", error)
