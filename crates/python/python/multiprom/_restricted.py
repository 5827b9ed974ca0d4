"""``registry.restricted_registry(names)`` that includes multiprom collectors.

``prometheus_client``'s HTTP handlers answer ``GET /metrics?name[]=a`` with
``registry.restricted_registry(['a'])``, whose ``collect()`` asks only the
collectors it finds by name: those whose ``describe()`` (or, with
``auto_describe``, first ``collect()``) named ``a``, and those of a registry
made with ``support_collectors_without_names=True``. A multiprocess collector
describes nothing, so in a default registry the answer is empty.

Patched, ``RestrictedRegistry.collect()`` first yields exactly what it did,
then the samples named ``names`` of each multiprom collector of the registry
it left out, family by family as ``Metric._restricted_metric`` keeps them.
Registries without a multiprom collector are answered as before.
"""

def patch(registry_module):
    """Patches ``registry_module.RestrictedRegistry.collect`` (once)."""
    restricted = registry_module.RestrictedRegistry
    original = restricted.collect
    if hasattr(original, "__wrapped__"):
        return

    def collect(self):
        yield from original(self)
        names = self._name_set
        for collector in _left_out(self):
            for metric in _collect_only(collector, names):
                kept = metric._restricted_metric(names)
                if kept:
                    yield kept

    collect.__doc__ = original.__doc__
    collect.__wrapped__ = original
    restricted.collect = collect


def _left_out(restricted):
    """The multiprom collectors of the underlying registry that
    ``RestrictedRegistry.collect`` does not ask, in registration order."""
    from multiprom import MultiProcessCollector

    try:
        registry = restricted._registry
        names = restricted._name_set
        with registry._lock:
            ours = [c for c in registry._collector_to_names if isinstance(c, MultiProcessCollector)]
            if not ours:
                return []
            # Those of a registry made with support_collectors_without_names
            # (prometheus_client 0.25 and later; before, there are none).
            asked = set(getattr(registry, "_collectors_without_names", ()))
            asked.update(registry._names_to_collectors[name] for name in names
                         if name != "target_info" and name in registry._names_to_collectors)
    except AttributeError:
        # A prometheus_client whose registries are laid out differently: its
        # own behaviour, unchanged.
        return []
    return [c for c in ours if c not in asked]


def _collect_only(collector, names):
    from multiprom import MultiProcessCollector

    if type(collector) is MultiProcessCollector:
        # Only the entries feeding the named samples are read and merged.
        return collector._collect_only(names)
    # A subclass collects its own way.
    return collector.collect()
