"""Prints what prometheus_client's OpenMetrics exposition prints for a
multiprocess directory's merged samples with the given exemplars attached:
Python's own MultiProcessCollector merges the directory (it never opens the
exemplar files), and each sample named in the spec carries its exemplar, as
a single-process registry's counter or histogram bucket would.

Usage: exemplar_exposition.py DIR SPEC_JSON
SPEC_JSON: [{"sample": name, "labels": {..}, "exemplar":
             {"labels": {..}, "value": float, "timestamp": float}}, ...]
"""

import json
import sys

from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.samples import Exemplar


class WithExemplars:
    def __init__(self, path, spec):
        self.merged = MultiProcessCollector(None, path=path)
        self.exemplars = {
            (s["sample"], tuple(sorted(s["labels"].items()))): Exemplar(
                s["exemplar"]["labels"],
                float(s["exemplar"]["value"]),
                float(s["exemplar"]["timestamp"]),
            )
            for s in spec
        }

    def collect(self):
        for metric in self.merged.collect():
            metric.samples = [
                s._replace(
                    exemplar=self.exemplars.get(
                        (s.name, tuple(sorted(s.labels.items())))
                    )
                )
                for s in metric.samples
            ]
            yield metric


def main():
    path, spec = sys.argv[1], json.load(open(sys.argv[2]))
    registry = CollectorRegistry()
    registry.register(WithExemplars(path, spec))
    sys.stdout.buffer.write(generate_latest(registry))


if __name__ == "__main__":
    main()
