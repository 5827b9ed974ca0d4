"""A prometheus_client worker for tests/integration/faults.rs.

Counts jobs and observes latencies in a loop, with a new label value every
ten steps so its files keep growing (and get resized), until it is killed.
Prints "ready" once its metrics exist. The Rust worker in faults.rs
(fault_writer_process) defines the same metrics, so both kinds of worker
write the same families.

usage: fault_writer.py [SECONDS_BETWEEN_STEPS]   (PROMETHEUS_MULTIPROC_DIR must be set)
"""

import sys
import time

from prometheus_client import Counter, Gauge, Histogram

jobs = Counter('jobs', 'Jobs done.', ['kind'])
latency = Histogram('latency_seconds', 'Latency.', ['kind'], buckets=[0.1, 0.5, 1.0])
busy = Gauge('busy', 'Busy workers.', multiprocess_mode='livesum')

pause = float(sys.argv[1]) if len(sys.argv) > 1 else 0.001
busy.set(1)
print('ready', flush=True)
step = 0
while True:
    kind = 'k%d' % (step // 10 % 5000)
    jobs.labels(kind).inc()
    latency.labels(kind).observe((step % 13) / 10)
    step += 1
    time.sleep(pause)
