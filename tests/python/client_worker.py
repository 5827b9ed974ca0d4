"""A Python worker writing the same metrics as the Rust workers of
tests/integration/client_interop.rs (keep the two definitions in sync).

Usage: PROMETHEUS_MULTIPROC_DIR=... client_worker.py INDEX ITERATIONS
"""
import sys

from prometheus_client import Counter, Gauge, Histogram, Summary

index = int(sys.argv[1])
iterations = int(sys.argv[2])

done = Counter("work_done_total", "Work items done", ["kind"])
seconds = Histogram("work_seconds", "Work duration", ["kind"], buckets=(0.1, 1.0, 10.0))
in_flight = Gauge("work_in_flight", "Work in flight", ["kind"], multiprocess_mode="livesum")
size = Summary("work_bytes", "Work size", ["kind"])
highest = Gauge("work_highest_index", "Highest worker index", multiprocess_mode="max")

highest.set(index)
for i in range(iterations):
    done.labels("shared").inc()
    done.labels("python").inc(0.5)
    seconds.labels("shared").observe((0.0625, 0.5, 5.0, 50.0)[i % 4])
    in_flight.labels("shared").inc()
    size.labels("shared").observe(2)
