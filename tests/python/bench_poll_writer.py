"""One writer process of the polling benchmark (bench_poll.py): the real
prometheus_client in multiprocess mode, with the made directory's metric
definitions (bench_shapes.py), updating them at a steady rate as a busy
worker does.

Usage: bench_poll_writer.py DIR SECONDS OPS_PER_SECOND SEED [SHAPE]

Each round is one request of the shape (`bench`: a counter `inc`, a
histogram `observe` and two gauge `set`s; `vllm`: a finished request's 13
operations); rounds are paced in 10 ms ticks. Prints "ready" once every
label set exists (its files are written), and the operations done when it
stops: after SECONDS, on SIGTERM or SIGINT, or when its parent is gone.
"""

import os
import random
import signal
import sys
import time

directory, seconds, rate, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
shape_name = sys.argv[5] if len(sys.argv) > 5 else "bench"
os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory

from bench_shapes import SHAPES  # noqa: E402

TICK = 0.01

stopping = False


def stop(_signum, _frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)

shape = SHAPES[shape_name]()
rng = random.Random(seed)
one_round = shape.rounds(rng)
print("ready", flush=True)

parent = os.getppid()
rounds_per_tick = rate / shape.OPS_PER_ROUND * TICK
deadline = time.monotonic() + seconds
next_tick = time.monotonic()
owed = 0.0
ops = 0
while not stopping and time.monotonic() < deadline and os.getppid() == parent:
    owed += rounds_per_tick
    while owed >= 1.0:
        owed -= 1.0
        one_round()
        ops += shape.OPS_PER_ROUND
    next_tick += TICK
    pause = next_tick - time.monotonic()
    if pause > 0:
        time.sleep(pause)
    else:
        # Behind (the machine is busy): drop the missed ticks, do not burst.
        next_tick = time.monotonic()
print("ops", ops, flush=True)
