"""Prints what Python itself serves for a directory: MultiProcessCollector's
merge + generate_latest, with the files in glob's order (the directory's
listing order), exactly as MultiProcessCollector.collect() takes them.

Usage: serve_python_exposition.py DIR text|openmetrics [--name=SAMPLE ...] [EXCLUDED_NAME ...]

EXCLUDED_NAMEs are left out of the listing, as if mark_process_dead had
removed them (removing names does not reorder the others). With --name
options, what prometheus_client serves for `?name[]=SAMPLE&...` in a
single process: its restricted registry (`_restricted_metric` of each
family), over a registry that includes collectors without names.
"""

import glob
import os
import sys

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics


class ListedMultiProcessCollector:
    def __init__(self, path, excluded):
        self._path = path
        self._excluded = set(excluded)

    def collect(self):
        files = [f for f in glob.glob(os.path.join(self._path, "*.db"))
                 if os.path.basename(f) not in self._excluded]
        return MultiProcessCollector.merge(files, accumulate=True)


def main():
    path, fmt, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    names = [a[len("--name="):] for a in rest if a.startswith("--name=")]
    excluded = [a for a in rest if not a.startswith("--name=")]
    registry = CollectorRegistry(support_collectors_without_names=True)
    registry.register(ListedMultiProcessCollector(path, excluded))
    if names:
        registry = registry.restricted_registry(names)
    encode = generate_latest if fmt == "text" else generate_openmetrics
    sys.stdout.buffer.write(encode(registry))


if __name__ == "__main__":
    main()
