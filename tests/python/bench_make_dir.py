"""Builds a benchmark directory with the real prometheus_client: WORKERS
forked processes, each writing its files in the metric shape SHAPE
(bench_shapes.py: `bench`, 4 files a worker with LABELS label sets each, or
`vllm`, 3 files a worker, an LLM API server's families), as a pre-fork
server's workers do.

Usage: bench_make_dir.py DIR WORKERS [--shape bench|vllm] [--labels N] [--seed S]

DIR must not exist or be empty. Values are pseudo-random but reproducible
(seeded by --seed and the worker's index). Prints "files N" when done.
"""

import argparse
import os
import random
import sys

parser = argparse.ArgumentParser()
parser.add_argument("dir")
parser.add_argument("workers", type=int)
parser.add_argument("--shape", default="bench", choices=("bench", "vllm", "exemplars"))
parser.add_argument("--labels", type=int, default=10, help="label sets of the bench shape")
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()

os.makedirs(args.dir, exist_ok=True)
if any(name.endswith(".db") for name in os.listdir(args.dir)):
    sys.exit(f"{args.dir} already has *.db files")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = args.dir

from bench_shapes import SHAPES  # noqa: E402

shape = SHAPES[args.shape]()


def work(index):
    rng = random.Random(args.seed * 1_000_003 + index)
    if args.shape != "vllm":
        shape.work(rng, args.labels)
    else:
        shape.work(rng)


BATCH = 32
children = []
for index in range(args.workers):
    pid = os.fork()
    if pid == 0:
        try:
            work(index)
        finally:
            os._exit(0)
    children.append(pid)
    if len(children) >= BATCH:
        for child in children:
            os.waitpid(child, 0)
        children = []
for child in children:
    _, status = os.waitpid(child, 0)
print("files", sum(1 for n in os.listdir(args.dir) if n.endswith(".db")))
