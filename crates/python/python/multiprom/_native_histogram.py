"""``multiprom.NativeHistogram``: a histogram recorded natively only, with
``prometheus_client``'s ``Histogram`` interface (``labels()``,
``observe()``, ``time()``).

Its classic part in the ``*.db`` file is one bucket, ``le="+Inf"``, and
``_sum``: what every reader of the directory shows for it
(``_bucket{le="+Inf"}``, ``_count``, ``_sum``), and how multiprom's
collector tells a native-only histogram from one with classic buckets
(prometheus_client's own ``Histogram`` refuses fewer than two buckets).
"""

from prometheus_client import REGISTRY
from prometheus_client.metrics import Histogram
from prometheus_client.utils import INF

from multiprom import _native_settings
from multiprom._native_observe import bind_lazily, classic, with_native, with_native_init


class NativeHistogram(Histogram):
    """A native histogram (sparse exponential buckets) across processes.

    ``schema`` (-4 to 8; 3 puts about 9% between bucket boundaries),
    ``max_buckets`` (more lowers the schema) and ``zero_threshold``
    (observations at most this far from 0 are counted as zero) default to
    ``MULTIPROM_NATIVE_HISTOGRAM_SCHEMA`` (else 3),
    ``MULTIPROM_NATIVE_HISTOGRAM_MAX_BUCKETS`` (else 160) and 2^-128.
    Records natively in multiprocess mode whether or not
    ``install(native_histograms=True)`` was called.
    """

    def __init__(self, name, documentation, labelnames=(), namespace='', subsystem='', unit='',
                 registry=REGISTRY, _labelvalues=None, schema=None, max_buckets=None,
                 zero_threshold=None):
        # Before the parent's __init__, which makes the series.
        self._multiprom_settings = _native_settings.checked(schema, max_buckets, zero_threshold)
        super().__init__(name, documentation, labelnames=labelnames, namespace=namespace,
                         subsystem=subsystem, unit=unit, registry=registry,
                         _labelvalues=_labelvalues, buckets=(INF,))
        # What labels() passes on to each child (instead of buckets).
        self._kwargs = dict(zip(('schema', 'max_buckets', 'zero_threshold'),
                                self._multiprom_settings))

    def _prepare_buckets(self, source_buckets):
        # The classic part is the +Inf bucket alone; prometheus_client's
        # check for at least two buckets is for classic histograms.
        self._upper_bounds = [INF]

    _multiprom_native = bind_lazily
    _metric_init = with_native_init(classic(Histogram._metric_init))
    observe = with_native(classic(Histogram.observe))
