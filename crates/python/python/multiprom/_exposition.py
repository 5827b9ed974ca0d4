"""``generate_latest`` for registries that hold only a multiprom collector:
the text is encoded by the Rust engine, not by ``prometheus_client``.

``prometheus_client``'s ``generate_latest`` formats every sample in Python,
which on a big multiprocess directory costs several times what the whole
collection costs on multiprom's engine. The same bytes come out of the
engine's own encoder (its output is tested byte for byte against
``prometheus_client``'s). So for the common case, a ``CollectorRegistry``
whose only collector is one ``multiprom.MultiProcessCollector`` (the
multiprocess recipe), or a restricted registry of one (``?name[]=``), these
functions return the engine's text; for anything else (other collectors,
target info, other escaping schemes or OpenMetrics versions), and on any
trouble, they call
``prometheus_client``'s own function, so the result is always what
``prometheus_client`` would print.
"""

from multiprom import _log

_UNDERSCORES = "underscores"


def _only_collector(registry):
    """The registry's one collector if it is a multiprom collector, else None."""
    from prometheus_client.registry import CollectorRegistry

    from multiprom import MultiProcessCollector

    # Subclasses may collect differently.
    if type(registry) is not CollectorRegistry:
        return None
    try:
        with registry._lock:
            if registry._target_info:
                return None
            collectors = list(registry._collector_to_names)
    except AttributeError:
        # A prometheus_client whose registry is laid out differently.
        return None
    if len(collectors) != 1 or type(collectors[0]) is not MultiProcessCollector:
        return None
    return collectors[0]


def _expose(registry, openmetrics):
    names = None
    if _is_restricted(registry):
        # registry.restricted_registry(names), as the HTTP handlers make for
        # `?name[]=`: the engine keeps the samples so named.
        try:
            names = registry._name_set
            registry = registry._registry
        except AttributeError:
            return None
    collector = _only_collector(registry)
    if collector is None:
        return None
    text, reports = collector._engine.expose(openmetrics, names)
    _log(reports)
    return text


def _is_restricted(registry):
    from prometheus_client import registry as registries

    return type(registry) is getattr(registries, "RestrictedRegistry", None)


def wrap_prometheus(original):
    """``prometheus_client.exposition.generate_latest``, engine-encoded
    where it can be."""

    def generate_latest(registry=None, escaping=_UNDERSCORES):
        if registry is None:
            from prometheus_client.registry import REGISTRY

            registry = REGISTRY
        if escaping == _UNDERSCORES:
            text = _expose(registry, openmetrics=False)
            if text is not None:
                return text
        return original(registry, escaping)

    generate_latest.__doc__ = original.__doc__
    generate_latest.__wrapped__ = original
    return generate_latest


def wrap_openmetrics(original):
    """``prometheus_client.openmetrics.exposition.generate_latest``,
    engine-encoded where it can be."""

    def generate_latest(registry, escaping=_UNDERSCORES, version="1.0.0"):
        if escaping == _UNDERSCORES and version == "1.0.0":
            text = _expose(registry, openmetrics=True)
            if text is not None:
                return text + b"# EOF\n"
        return original(registry, escaping, version)

    generate_latest.__doc__ = original.__doc__
    generate_latest.__wrapped__ = original
    return generate_latest
