"""Writes a multiprocess directory with whatever prometheus_client is
installed: two forked workers with a labelled counter, gauges in the modes
every supported release has (plus sum, mostrecent and their live forms
where the release has them), a histogram
and a summary. The workers exit before this returns.
Usage: PROMETHEUS_MULTIPROC_DIR=... compat_writer.py
"""

import os
import sys


def work(i):
    from prometheus_client import Counter, Gauge, Histogram, Summary

    Counter("jobs", "Jobs done.", ["queue"]).labels("fast").inc(i + 1)
    for mode in ("all", "liveall", "livesum", "max", "min"):
        Gauge("g_" + mode, "Gauge " + mode + ".", multiprocess_mode=mode).set(i + 0.5)
    for mode in ("sum", "livemax", "livemin", "mostrecent", "livemostrecent"):
        try:
            Gauge("g_" + mode, "Gauge " + mode + ".", multiprocess_mode=mode).set(i + 0.25)
        except ValueError:
            pass  # a release before this mode
    Histogram("latency_seconds", "Latency.", buckets=(0.1, 1.0)).observe(0.05 * (i + 1))
    Summary("size_bytes", "Size.").observe(100 * (i + 1))


def main():
    for i in range(2):
        pid = os.fork()
        if pid == 0:
            try:
                work(i)
            finally:
                os._exit(0 if sys.exc_info()[0] is None else 1)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit("worker %d failed" % i)


if __name__ == "__main__":
    main()
