"""``multiprom.install()`` at interpreter start, for applications you cannot
edit: imported by the wheel's ``multiprom.pth`` when ``MULTIPROM_INSTALL`` is
set to anything but ``""``, ``0``, ``false``, ``no`` or ``off``.

It must never stop the application from starting: any failure becomes a
``RuntimeWarning`` and ``prometheus_client``'s own collector stays in use.
"""

import os
import warnings

_OFF = ("", "0", "false", "no", "off")


def _run():
    if os.environ.get("MULTIPROM_INSTALL", "").strip().lower() in _OFF:
        return
    try:
        import multiprom

        multiprom.install()
    except BaseException as error:  # noqa: B036 -- start-up must go on
        warnings.warn(
            f"multiprom: MULTIPROM_INSTALL is set but the drop-in could not be installed "
            f"({error!r}); prometheus_client's MultiProcessCollector stays in use",
            RuntimeWarning,
        )


_run()
