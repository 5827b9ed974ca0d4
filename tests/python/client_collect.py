"""Collect a multiprocess directory with prometheus_client's own merge.

Usage: client_collect.py DIR [--text]

Merges the directory's *.db files in glob's (the directory's listing) order,
as MultiProcessCollector.collect() does, with
MultiProcessCollector.merge(accumulate=True).
Prints the samples as JSON ([[name, {labels}, repr(value)], ...]), or with
--text the Prometheus text exposition (generate_latest).
"""
import glob
import json
import os
import sys

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

directory = sys.argv[1]
files = glob.glob(os.path.join(directory, "*.db"))
metrics = list(MultiProcessCollector.merge(files, accumulate=True))


class Merged:
    def collect(self):
        return metrics


registry = CollectorRegistry()
registry.register(Merged())
if "--text" in sys.argv[2:]:
    sys.stdout.write(generate_latest(registry).decode("utf-8"))
else:
    samples = []
    for metric in metrics:
        for s in metric.samples:
            samples.append([s.name, s.labels, repr(float(s.value))])
    json.dump(samples, sys.stdout)
