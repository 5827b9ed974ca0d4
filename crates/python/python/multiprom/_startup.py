"""``multiprom.install()`` at interpreter start, for applications you cannot
edit: imported by the wheel's ``multiprom.pth`` when ``MULTIPROM_INSTALL`` is
set.

``MULTIPROM_INSTALL`` is a comma-separated list of features: ``collector``
(``prometheus_client``'s ``MultiProcessCollector`` becomes multiprom's) and
``writer`` (``prometheus_client``'s metrics write their files through
multiprom) and ``native-histograms`` (every ``prometheus_client``
``Histogram`` also records natively), e.g. ``collector,writer``. ``1``, ``true``, ``yes`` and ``on``
mean ``collector``; ``""``, ``0``, ``false``, ``no`` and ``off`` mean
nothing.

It must never stop the application from starting: an unknown feature name
or any failure becomes a ``RuntimeWarning``; what is not installed stays
``prometheus_client``'s own.
"""

import os
import sys
import warnings


def _warn(message):
    """``warnings.warn(message, RuntimeWarning)``, or ``message`` on stderr
    where the warning filters (``-W error``) would raise it: nothing here
    may stop the interpreter's start-up (``multiprom._warn`` does the same
    for the package; importing it would import the package)."""
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    except Exception:  # noqa: BLE001 -- a filter made it an error
        try:
            sys.stderr.write(f"RuntimeWarning: {message}\n")
        except Exception:  # noqa: BLE001 -- no stderr: nothing left to tell
            pass

_OFF = ("", "0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")
FEATURES = ("collector", "writer", "native-histograms")


def features(setting):
    """``(features, unknown)``: the known features ``setting`` (the
    variable's value) asks for, and the names it has that are none."""
    setting = setting.strip().lower()
    if setting in _OFF:
        return set(), []
    if setting in _ON:
        return {"collector"}, []
    names = [name.strip() for name in setting.split(",") if name.strip()]
    return {n for n in names if n in FEATURES}, [n for n in names if n not in FEATURES]


def _run():
    try:
        wanted, unknown = features(os.environ.get("MULTIPROM_INSTALL", ""))
        if unknown:
            _warn(
                f"multiprom: MULTIPROM_INSTALL names unknown features {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(FEATURES)}); "
                + (f"installing {', '.join(sorted(wanted))}" if wanted else "installing nothing")
            )
        if not wanted:
            return
        import multiprom

        multiprom.install(collector="collector" in wanted, writer="writer" in wanted,
                          native_histograms="native-histograms" in wanted)
    except BaseException as error:  # noqa: B036 -- start-up must go on
        _warn(
            f"multiprom: MULTIPROM_INSTALL is set but multiprom could not be installed "
            f"({error!r}); prometheus_client's own MultiProcessCollector and value class stay in use"
        )


_run()
