"""Writes 20000 counter children with the real prometheus_client, so its
file grows (and is re-mapped) several times while the test inspects it.
Usage: inspect_writer.py CONTROL_DIR  (PROMETHEUS_MULTIPROC_DIR set)
Writes CONTROL_DIR/started after the first entry, CONTROL_DIR/done at the end.
"""

import os
import sys

from prometheus_client import Counter


def note(control, name):
    tmp = os.path.join(control, "." + name)
    open(tmp, "w").close()
    os.rename(tmp, os.path.join(control, name))


def main():
    control = sys.argv[1]
    grown = Counter("grown", "Grows the file.", ["n"])
    for i in range(20000):
        grown.labels(str(i)).inc()
        if i == 0:
            note(control, "started")
    note(control, "done")


if __name__ == "__main__":
    main()
