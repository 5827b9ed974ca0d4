"""Reads a directory of *.db files written by Rust, the ways Python does, and
computes mmap_key() for the inputs the Rust writer encoded.

usage: format_python_reads.py DIR SPEC_JSON

SPEC_JSON: {"keys": [[family, sample, labelnames, labelvalues, help], ...]}
Prints JSON:
  mmap_keys    mmap_key(...) for every spec entry, in order
  files        MmapedDict.read_all_values_from_file for every *.db file
  read_metrics MultiProcessCollector's per-file view (before merging)
  merged       MultiProcessCollector.collect() through a registry
  exposition_bytes  length of generate_latest() (it must not raise)
"""

import glob
import json
import os
import sys

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import mmap_key
from prometheus_client.multiprocess import MultiProcessCollector

from format_common import dump_dir, f64_hex


def metric_json(metric, with_timestamps):
    samples = []
    for s in metric.samples:
        labels = sorted(s.labels.items()) if isinstance(s.labels, dict) else sorted(s.labels)
        ts = s.timestamp if with_timestamps else None
        samples.append([s.name, [list(kv) for kv in labels], f64_hex(s.value),
                        None if ts is None else f64_hex(ts)])
    return {'name': metric.name, 'type': metric.type, 'help': metric.documentation,
            'samples': samples}


def main():
    directory, spec_path = sys.argv[1], sys.argv[2]
    with open(spec_path, encoding='utf-8') as f:
        spec = json.load(f)
    keys = [mmap_key(family, sample, names, values, help_text)
            for family, sample, names, values, help_text in spec['keys']]

    files = sorted(glob.glob(os.path.join(directory, '*.db')))
    read_metrics = MultiProcessCollector._read_metrics(files)

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    merged = list(registry.collect())
    exposition = generate_latest(registry)

    json.dump({
        'mmap_keys': keys,
        'files': dump_dir(directory),
        'read_metrics': [metric_json(m, True) for m in read_metrics.values()],
        'merged': [metric_json(m, False) for m in merged],
        'exposition_bytes': len(exposition),
    }, sys.stdout)


if __name__ == '__main__':
    main()
