"""Prints what Python itself serves for a directory: MultiProcessCollector's
merge + generate_latest, with the files in sorted (name) order as multiprom
takes them. Usage: serve_python_exposition.py DIR text|openmetrics
"""

import glob
import os
import sys

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics


class SortedMultiProcessCollector:
    def __init__(self, path):
        self._path = path

    def collect(self):
        files = sorted(glob.glob(os.path.join(self._path, "*.db")))
        return MultiProcessCollector.merge(files, accumulate=True)


def main():
    path, fmt = sys.argv[1], sys.argv[2]
    registry = CollectorRegistry()
    registry.register(SortedMultiProcessCollector(path))
    encode = generate_latest if fmt == "text" else generate_openmetrics
    sys.stdout.buffer.write(encode(registry))


if __name__ == "__main__":
    main()
