"""Reference timing of prometheus_client's multiprocess scrape, for the
Collector section of docs/benchmarks.md (the Rust side is
`cargo bench -p multiprom-collector --bench scrape`).

Usage: bench_collect.py DIR [--repeat N] [--output FILE]

Times, on DIR as it is (files unchanged between runs, page cache warm after
one unmeasured run), N runs of each (default 5):

  collect   MultiProcessCollector(registry, path=DIR).collect()
  scrape    generate_latest(registry): collect + Prometheus text, what a
            /metrics request served by prometheus_client costs

Python keeps nothing between scrapes, so there is no cold/warm difference.
Prints "files N", "entries N", then one line per case: name, best seconds,
and the median.
With --output, writes the exposition to FILE (to compare with multiprom's;
sample order may differ: Python merges files in directory order).
"""
import argparse
import glob
import os
import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

parser = argparse.ArgumentParser()
parser.add_argument("dir")
parser.add_argument("--repeat", type=int, default=5)
parser.add_argument("--output")
args = parser.parse_args()

files = glob.glob(os.path.join(args.dir, "*.db"))
entries = sum(
    sum(1 for _ in MmapedDict.read_all_values_from_file(f)) for f in files
)
print(f"files {len(files)}")
print(f"entries {entries}")

registry = CollectorRegistry()
collector = MultiProcessCollector(registry, path=args.dir)
text = generate_latest(registry)  # unmeasured: warms the page cache
if args.output:
    with open(args.output, "wb") as out:
        out.write(text)


def timed(name, fn):
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    print(f"{name} {times[0]:.4f} s (median {median:.4f} s)")


timed("collect", collector.collect)
timed("scrape", lambda: generate_latest(registry))
