"""Native histograms for every ``prometheus_client`` ``Histogram``
(``multiprom.install(native_histograms=True)``): its ``observe`` and
``_metric_init`` wrapped so each observation is also recorded in the
process's native histogram file. The classic buckets and ``*.db`` files
are untouched: the wrapper runs prometheus_client's own ``observe`` first.
"""

from multiprom._native_observe import bind_lazily, classic, with_native, with_native_init


def patch(metrics):
    """Patch ``prometheus_client.metrics`` (the module ``metrics``)."""
    from prometheus_client import values

    if not getattr(values.ValueClass, "_multiprocess", False):
        # Single-process mode (decided when prometheus_client.values was
        # imported): no directory to record in; observe stays as it is.
        return
    histogram = metrics.Histogram
    if classic(histogram.observe) is not histogram.observe:
        return  # patched already
    histogram._multiprom_native = bind_lazily
    histogram._metric_init = with_native_init(histogram._metric_init)
    histogram.observe = with_native(histogram.observe)
