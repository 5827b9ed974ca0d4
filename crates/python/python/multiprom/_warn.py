"""``warn``: ``warnings.warn`` for what multiprom leaves out, never raising.

Under ``-W error`` (or ``PYTHONWARNINGS=error``) a warning is raised as an
exception; multiprom's say what it did not do (a setting it could not use, a
class it kept), never a reason to stop the application, so one that would
be raised is written to stderr instead.
"""

import sys
import warnings


def warn(message, category=RuntimeWarning, stacklevel=2):
    """``warnings.warn(message, category)``, or ``message`` on stderr where
    the warning filters would raise it."""
    try:
        warnings.warn(message, category, stacklevel=stacklevel + 1)
    except Exception:  # noqa: BLE001 -- a filter made it an error
        try:
            sys.stderr.write(f"{category.__name__}: {message}\n")
        except Exception:  # noqa: BLE001 -- no stderr: nothing left to tell
            pass
