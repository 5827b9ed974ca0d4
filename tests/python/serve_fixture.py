"""Writes a varied multiprocess directory with the real prometheus_client.

Three worker processes (real forks, so three pids) write counters, gauges in
all ten modes, histograms and summaries, with labels and help texts that
need escaping. The workers exit (and are waited for) before this returns,
so their pids are dead. Usage: serve_fixture.py  (PROMETHEUS_MULTIPROC_DIR set).
"""

import os
import sys

MODES = ["all", "liveall", "min", "livemin", "max", "livemax", "sum",
         "livesum", "mostrecent", "livemostrecent"]


def work(i):
    # Imported in the child: the metrics' files are named with its pid.
    from prometheus_client import Counter, Gauge, Histogram, Summary

    requests = Counter("http_requests", "HTTP requests.", ["method", "code"])
    requests.labels("GET", "200").inc(i + 1)
    requests.labels("POST", "500").inc(0.5 * i)
    for mode in MODES:
        gauge = Gauge("g_" + mode, "Gauge in mode " + mode + ".", ["model"],
                      multiprocess_mode=mode)
        gauge.labels("llama").set(i * 10 + 1)
        if mode not in ("mostrecent", "livemostrecent"):
            gauge.labels("mistral").inc(i)
    latency = Histogram("latency_seconds", "Latency.", ["route"],
                        buckets=(0.1, 0.5, 1.0))
    latency.labels("/a").observe(0.05 * (i + 1))
    latency.labels("/b").observe(2.0)
    Summary("payload_bytes", 'Payload "size"\nin bytes \\ here.').observe(100 * i)
    Counter("unicode", "Ünïcode ✓.", ["name"]).labels('é"\\\n').inc()


def main():
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        sys.exit("PROMETHEUS_MULTIPROC_DIR is not set")
    for i in range(3):
        pid = os.fork()
        if pid == 0:
            try:
                work(i)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit("worker failed")


if __name__ == "__main__":
    main()
