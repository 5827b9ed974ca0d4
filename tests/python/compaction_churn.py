"""Worker churn with the real prometheus_client: a master forks waves of
short-lived workers; each writes a counter, a histogram, a max gauge and a
livesum gauge, then exits, and the master calls mark_process_dead for it
(as gunicorn's child_exit hook does).

Usage: compaction_churn.py WAVES PER_WAVE   (PROMETHEUS_MULTIPROC_DIR set)
Prints the number of workers that ran.
"""

import os
import sys


def work():
    from prometheus_client import Counter, Gauge, Histogram

    Counter("jobs", "Jobs done").inc(3)
    Histogram("latency_seconds", "Latency", buckets=(0.1, 1.0)).observe(0.5)
    Gauge("peak", "Peak", multiprocess_mode="max").set(os.getpid() % 1000)
    Gauge("busy", "Busy workers", multiprocess_mode="livesum").inc()


def main():
    from prometheus_client import multiprocess

    waves, per_wave = int(sys.argv[1]), int(sys.argv[2])
    ran = 0
    for _ in range(waves):
        pids = []
        for _ in range(per_wave):
            pid = os.fork()
            if pid == 0:
                try:
                    work()
                finally:
                    os._exit(0)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            if status != 0:
                sys.exit(f"worker {pid} failed: {status}")
            multiprocess.mark_process_dead(pid)
            ran += 1
    print(ran)


main()
