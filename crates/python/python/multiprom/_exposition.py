"""``prometheus_client``'s ``generate_latest`` engine-encoded for registries
that hold only a multiprom collector.

``prometheus_client``'s ``generate_latest`` formats every sample in Python,
which on a big multiprocess directory costs several times what the whole
collection costs on multiprom's engine. The same bytes come out of the
engine's own encoder (its output is tested byte for byte against
``prometheus_client``'s). So for the common case, a ``CollectorRegistry``
whose only collector is one ``multiprom.MultiProcessCollector`` (the
multiprocess recipe), or a restricted registry of one (``?name[]=``), these
functions return the engine's text, in any of the four escaping schemes
(Prometheus 3 asks for ``allow-utf-8``); for anything else (other
collectors, target info, other OpenMetrics versions), and on any trouble,
they call ``prometheus_client``'s own function, so the result is always
what ``prometheus_client`` would print (0.26's, on older releases: see
docs/python.md).

``prometheus_client``'s HTTP handlers (``make_wsgi_app``,
``make_asgi_app``, ``start_http_server``) all answer through its
``_bake_output``: patched too, it answers a scraper that prefers the
Prometheus protobuf format (as Prometheus does with native histograms on)
with that format, native histograms included, when the registry is such a
common case and the directory has native histograms; otherwise, or on any
trouble, ``prometheus_client``'s own ``_bake_output`` answers, in text as
always (it has no protobuf format, and without native histograms the text
carries everything).

The functions keep their identity: ``patch`` gives
``prometheus_client.exposition.generate_latest`` (which is also
``prometheus_client.generate_latest``) and
``prometheus_client.openmetrics.exposition.generate_latest`` new code, with
the same parameters, that calls ``_text_latest`` or ``_openmetrics_latest``
here. Code that imported them before (``from prometheus_client import
generate_latest`` at the top of a module, usually before any collector is
made) holds the same function objects, so it gets the engine's text too;
replacing the module attributes would reach only code that looks the name
up at call time. The originals stay callable as ``__wrapped__``.
"""

import inspect
import logging
import sys
import threading
import types

from multiprom import _log

_UNDERSCORES = "underscores"
# The `escaping` schemes the engine writes as prometheus_client 0.26 does
# (Prometheus 3 asks for allow-utf-8).
_ESCAPINGS = frozenset((_UNDERSCORES, "allow-utf-8", "dots", "values"))
_OPENMETRICS_VERSION = "1.0.0"

# install(exposition=False) turns this off.
_wanted = True

# Entry name -> (the function given new code, its own code), while patched.
_patched = {}
# Entry name -> a copy of the original function (kept after unpatching, for
# calls already under way).
_originals = {}
_lock = threading.Lock()


def set_wanted(wanted):
    """Whether ``generate_latest`` is engine-encoded: patched now if
    ``prometheus_client.exposition`` is imported (else when it is, by
    ``patch``), restored if not wanted."""
    global _wanted
    _wanted = wanted
    if not wanted:
        unpatch()
        return
    text = sys.modules.get("prometheus_client.exposition")
    if text is not None:
        patch(text)


def patch(text):
    """Gives ``prometheus_client``'s ``generate_latest`` functions the
    engine-encoding code (once); ``text`` is
    ``prometheus_client.exposition``, which imports the OpenMetrics one."""
    if not _wanted:
        return
    _give_code(getattr(text, "generate_latest", None), "_text_latest")
    _give_code(getattr(text, "_bake_output", None), "_bake_latest")
    openmetrics = sys.modules.get("prometheus_client.openmetrics.exposition")
    if openmetrics is not None:
        _give_code(getattr(openmetrics, "generate_latest", None), "_openmetrics_latest")


def unpatch():
    """Gives the functions their own code back."""
    with _lock:
        for function, code in _patched.values():
            function.__code__ = code
            del function.__wrapped__
        _patched.clear()


def _give_code(function, entry):
    with _lock:
        if entry in _patched or not isinstance(function, types.FunctionType):
            return
        code = function.__code__
        forward = _forwarding_code(code, entry)
        if forward is None:
            # Parameters this does not know how to pass on: the function
            # stays prometheus_client's own (correct, only slower).
            return
        original = types.FunctionType(code, function.__globals__, function.__name__,
                                      function.__defaults__, function.__closure__)
        original.__kwdefaults__ = function.__kwdefaults__
        original.__qualname__ = function.__qualname__
        original.__module__ = function.__module__
        original.__doc__ = function.__doc__
        _originals[entry] = original
        _patched[entry] = (function, code)
        function.__code__ = forward
        function.__wrapped__ = original


def _forwarding_code(code, entry):
    """Code with ``code``'s parameters that passes them all by name to
    ``entry`` in this module. The function it is given to keeps its own
    defaults, name and docstring. None for parameters other than plain
    positional-or-keyword ones, or a closure (which code of a function must
    keep)."""
    special = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    if code.co_freevars or code.co_kwonlyargcount or code.co_posonlyargcount or code.co_flags & special:
        return None
    parameters = code.co_varnames[:code.co_argcount]
    source = (f"def {code.co_name}({', '.join(parameters)}):\n"
              f"    from multiprom._exposition import {entry}\n"
              f"    return {entry}({', '.join(f'{p}={p}' for p in parameters)})\n")
    namespace = {}
    exec(compile(source, f"<multiprom: {code.co_name} engine-encoded>", "exec"), namespace)
    return namespace[code.co_name].__code__


def _text_latest(**arguments):
    """``prometheus_client.exposition.generate_latest(registry, escaping)``."""
    escaping = arguments.get("escaping", _UNDERSCORES)
    if arguments.keys() <= {"registry", "escaping"} and escaping in _ESCAPINGS:
        text = _expose(arguments.get("registry"), openmetrics=False, escaping=escaping)
        if text is not None:
            return text
    return _originals["_text_latest"](**arguments)


def _openmetrics_latest(**arguments):
    """``prometheus_client.openmetrics.exposition.generate_latest(registry,
    escaping, version)``."""
    escaping = arguments.get("escaping", _UNDERSCORES)
    if arguments.keys() <= {"registry", "escaping", "version"} and escaping in _ESCAPINGS and \
            arguments.get("version", _OPENMETRICS_VERSION) == _OPENMETRICS_VERSION:
        text = _expose(arguments.get("registry"), openmetrics=True, escaping=escaping)
        if text is not None:
            return text + b"# EOF\n"
    return _originals["_openmetrics_latest"](**arguments)


# How prometheus_client's OpenMetrics encoder writes a sample name's `:`
# ("_" or ":"; "" when it could not be told; None: not asked yet).
_openmetrics_colon = None


class _ColonGauge:
    """A collector of one gauge whose name has a ``:``."""

    def collect(self):
        from prometheus_client.metrics_core import GaugeMetricFamily

        yield GaugeMetricFamily("multiprom:probe", "Probe.", value=1)


def _openmetrics_colon_written():
    """How the installed ``prometheus_client``'s OpenMetrics encoder writes
    a sample name's ``:`` by default: ``"_"`` (0.23 on, as the engine does
    with ``underscores``), ``":"`` (older releases, which the package allows:
    the engine keeps it then), or ``""`` when its answer is neither (its own
    encoder runs, on the samples of multiprom's collector). Asked once, of
    its own encoder."""
    global _openmetrics_colon
    if _openmetrics_colon is None:
        try:
            text = _originals["_openmetrics_latest"](registry=_ColonGauge())
        except Exception:  # its own encoder, then
            text = b""
        if b"\nmultiprom_probe 1.0\n" in text:
            _openmetrics_colon = "_"
        elif b"\nmultiprom:probe 1.0\n" in text:
            _openmetrics_colon = ":"
        else:
            _openmetrics_colon = ""
    return _openmetrics_colon


# Whether serving the protobuf format failed once (logged then only).
_protobuf_failed = False

# prometheus_client's _bake_output parameters since 0.17 (0.12 to 0.16
# have no compression parameters and return another shape: left alone).
_BAKE_PARAMETERS = frozenset(
    ("registry", "accept_header", "accept_encoding_header", "params", "disable_compression"))


def _bake_latest(**arguments):
    """``prometheus_client.exposition._bake_output(registry, accept_header,
    accept_encoding_header, params, disable_compression)``: ``(status,
    headers, body)`` for one ``/metrics`` request."""
    if arguments.keys() == _BAKE_PARAMETERS:
        arguments["params"] = _text_params(arguments["registry"], arguments["params"])
        try:
            baked = _bake_protobuf(**arguments)
        except Exception as error:  # never fail a scrape for it
            global _protobuf_failed
            if not _protobuf_failed:
                _protobuf_failed = True
                _log([(logging.WARNING, f"protobuf format not served ({error!r}); "
                       "prometheus_client answers in text. Logged once per process")])
            baked = None
        if baked is not None:
            return baked
    return _originals["_bake_latest"](**arguments)


def _text_params(registry, params):
    """``params`` as text where the ASGI handler of a ``prometheus_client``
    before 0.23 parsed the query as bytes: it looks ``name[]`` up as text,
    finds nothing and answers the whole registry, so a poller's
    ``?name[]=`` would cost a whole scrape. Decoded as 0.23 on decodes the
    query (UTF-8, a bad byte replaced), for a registry holding a multiprom
    collector; any other registry is answered as the release answers it."""
    try:
        if not any(isinstance(key, bytes) for key in params) or not _holds_ours(registry):
            return params
        return {_text(key): [_text(value) for value in values] for key, values in params.items()}
    except Exception:  # not what that handler passes: its own behaviour
        return params


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _holds_ours(registry):
    """Whether ``registry`` holds a multiprom collector."""
    from multiprom import MultiProcessCollector

    with registry._lock:
        collectors = list(registry._collector_to_names)
    return any(isinstance(c, MultiProcessCollector) for c in collectors)


def _bake_protobuf(registry, accept_header, accept_encoding_header, params, disable_compression):
    """The protobuf answer, or None where prometheus_client's must be given."""
    # Cheap refusals first: most scrapers never name the protobuf format.
    if not accept_header or "protobuf" not in accept_header:
        return None
    collector = _only_collector(registry)
    if collector is None:
        return None
    names = params["name[]"] if "name[]" in params else None
    from prometheus_client.exposition import gzip_accepted

    body, reports, content_type = collector._engine.expose_protobuf(accept_header, names)
    _log(reports)
    if body is None:
        return None
    headers = [("Content-Type", content_type)]
    if not disable_compression and gzip_accepted(accept_encoding_header):
        import gzip

        body = gzip.compress(body)
        headers.append(("Content-Encoding", "gzip"))
    return "200 OK", headers, body


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


def _expose(registry, openmetrics, escaping=_UNDERSCORES):
    """The engine's text for ``registry`` (without OpenMetrics' ``# EOF``),
    names escaped as ``escaping`` says, or None where
    ``prometheus_client``'s function must run."""
    if openmetrics:
        colon = _openmetrics_colon_written()
        if not colon:
            return None
        if colon == ":":
            # A release before 0.23 (which has no escaping schemes) writes
            # the names it accepts as allow-utf-8 writes them: a `:` kept.
            escaping = "allow-utf-8"
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
    text, reports = collector._engine.expose(openmetrics, names, escaping)
    _log(reports)
    return text


def _is_restricted(registry):
    from prometheus_client import registry as registries

    return type(registry) is getattr(registries, "RestrictedRegistry", None)
