"""The multiprom package's collector carries the exemplars of a directory
(written beside its *.db files by multiprom's writers) on its Sample objects,
and prometheus_client's OpenMetrics exposition prints them: through the
Metric objects (collect() and merge(), printed by prometheus_client's own
code) and through the engine's encoding (generate_latest of a registry whose
only collector is multiprom's) alike, each equal to REFERENCE, what
prometheus_client prints for the same samples and exemplars.

Usage: python_package_exemplars.py DIR REFERENCE_FILE
"""

import glob
import os
import sys

from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.samples import Exemplar

import multiprom


class Yielding:
    """Another collector: its registry is printed by prometheus_client's own
    code, from the Metric objects."""

    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self):
        return self.metrics()


def check(what, got, reference):
    if got != reference:
        raise AssertionError(f"{what} differs:\n{got.decode()}\n--- reference\n{reference.decode()}")


def main():
    path, reference = sys.argv[1], open(sys.argv[2], "rb").read()

    registry = CollectorRegistry()
    collector = multiprom.MultiProcessCollector(registry, path=path)
    check("engine encoding", generate_latest(registry), reference)

    metrics = list(collector.collect())
    bucket = [s for m in metrics for s in m.samples if s.name == "latency_seconds_bucket"][0]
    if not isinstance(bucket.exemplar, Exemplar) or bucket.exemplar.labels != {"trace_id": "fast"}:
        raise AssertionError(f"bucket sample: {bucket!r}")
    if any(s.exemplar is not None for m in metrics for s in m.samples if not s.name.endswith(("_total", "_bucket"))):
        raise AssertionError("an exemplar on a sample that may not carry one")

    check("collect()", generate_latest(Yielding(collector.collect)), reference)
    files = glob.glob(os.path.join(path, "*.db"))
    check("merge()", generate_latest(Yielding(lambda: multiprom.MultiProcessCollector.merge(files))), reference)
    print("ok")


if __name__ == "__main__":
    main()
