"""How native histograms record: the schema, the bucket limit and the zero
threshold, from the environment (``MULTIPROM_NATIVE_HISTOGRAM_SCHEMA``,
``MULTIPROM_NATIVE_HISTOGRAM_MAX_BUCKETS``) or from
``multiprom.NativeHistogram``'s arguments.

A bad environment value must not stop the application: it is warned of
(once per value) and the default is used. A bad argument is the
programmer's, and raises, as prometheus_client raises for bad buckets.
"""

import functools
import math
import os
from multiprom import _native
from multiprom._warn import warn

SCHEMA_VARIABLE = "MULTIPROM_NATIVE_HISTOGRAM_SCHEMA"
MAX_BUCKETS_VARIABLE = "MULTIPROM_NATIVE_HISTOGRAM_MAX_BUCKETS"
# client_golang's usual choices: about 9% between bucket boundaries, and a
# bucket limit that keeps a series' record small.
DEFAULT_SCHEMA = 3
DEFAULT_MAX_BUCKETS = 160


def from_env():
    """``(schema, max_buckets)`` from the environment, defaults for what is
    unset or invalid."""
    return (_env_int(SCHEMA_VARIABLE, os.environ.get(SCHEMA_VARIABLE), DEFAULT_SCHEMA,
                     _native.NATIVE_MIN_SCHEMA, _native.NATIVE_MAX_SCHEMA),
            _env_int(MAX_BUCKETS_VARIABLE, os.environ.get(MAX_BUCKETS_VARIABLE),
                     DEFAULT_MAX_BUCKETS, 1, _native.NATIVE_MAX_BUCKETS))


# Cached by value, so each bad value is warned of once, not once per
# histogram.
@functools.lru_cache(maxsize=None)
def _env_int(variable, text, default, low, high):
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        warn(f"multiprom: {variable}={text!r} is not a whole number from {low} to "
             f"{high}; native histograms use {default}")
        return default
    return value


def checked(schema, max_buckets, zero_threshold):
    """``(schema, max_buckets, zero_threshold)`` for ``NativeHistogram``'s
    arguments, ``None`` meaning the environment's (or the default) value;
    ``ValueError`` for one out of range."""
    env_schema, env_max_buckets = from_env()
    if schema is None:
        schema = env_schema
    elif isinstance(schema, bool) or not isinstance(schema, int) or not (
            _native.NATIVE_MIN_SCHEMA <= schema <= _native.NATIVE_MAX_SCHEMA):
        raise ValueError(f"schema must be a whole number from {_native.NATIVE_MIN_SCHEMA} "
                         f"to {_native.NATIVE_MAX_SCHEMA}, not {schema!r}")
    if max_buckets is None:
        max_buckets = env_max_buckets
    elif isinstance(max_buckets, bool) or not isinstance(max_buckets, int) or not (
            1 <= max_buckets <= _native.NATIVE_MAX_BUCKETS):
        raise ValueError(f"max_buckets must be a whole number from 1 to "
                         f"{_native.NATIVE_MAX_BUCKETS}, not {max_buckets!r}")
    if zero_threshold is not None:
        zero_threshold = float(zero_threshold)
        if not (zero_threshold >= 0 and math.isfinite(zero_threshold)):
            raise ValueError(f"zero_threshold must be a finite number >= 0, not {zero_threshold!r}")
    return schema, max_buckets, zero_threshold
