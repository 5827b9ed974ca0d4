"""Putting multiprom's value class into ``prometheus_client.values``
(``multiprom.install(writer=True)``)."""

from multiprom import _native
from multiprom._values import MultiProcessValue
from multiprom._warn import warn


def patch(values):
    """Patch ``prometheus_client.values`` (the module ``values``)."""
    values.MultiProcessValue = MultiProcessValue
    current = getattr(values, "ValueClass", None)
    if not getattr(current, "_multiprocess", False) or issubclass(current, _native.Value):
        # Single-process mode (MutexValue), or multiprom's class already.
        return
    made = values_made(current)
    if made is None:
        warn(
            "multiprom: cannot tell whether prometheus_client's multiprocess value class "
            f"{current!r} has made values already; keeping it (metrics write through "
            "prometheus_client, not multiprom)"
        )
        return
    if made:
        warn(
            f"multiprom: prometheus_client's multiprocess value class has made {made} "
            "values in this process already; keeping it (two writers of one file would "
            "overwrite each other's entries). Call multiprom.install(writer=True) before "
            "any metric is made, or set MULTIPROM_INSTALL=collector,writer"
        )
        return
    identifier = _closure_variable(
        getattr(current, "_MmapedValue__check_for_pid_change", None), "process_identifier")
    if identifier is None:
        values.ValueClass = MultiProcessValue()
    else:
        values.ValueClass = MultiProcessValue(identifier)


def values_made(value_class):
    """How many values ``prometheus_client``'s class ``value_class`` has
    made (and not closed) in this process: the length of the ``values``
    list its ``__init__`` appends to, a variable of the closure
    ``MultiProcessValue()`` made it in. ``None`` when the class is not
    built that way."""
    made = _closure_variable(getattr(value_class, "__init__", None), "values")
    return len(made) if isinstance(made, list) else None


def _closure_variable(function, name):
    """The value of free variable ``name`` of ``function``, or ``None``."""
    code = getattr(function, "__code__", None)
    closure = getattr(function, "__closure__", None)
    if code is None or closure is None or name not in code.co_freevars:
        return None
    try:
        return closure[code.co_freevars.index(name)].cell_contents
    except ValueError:  # an empty cell
        return None
