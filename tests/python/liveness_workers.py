"""Long-lived workers writing with the real prometheus_client, each under
a process identifier of the test's choosing, as uWSGI and gunicorn
applications that recycle workers name their files by a worker index
(`values.MultiProcessValue(process_identifier=...)`): the number in the
file names is then not the writer's pid.

Usage: liveness_workers.py CONTROL_DIR ID [ID ...]   (PROMETHEUS_MULTIPROC_DIR set)

One worker is forked per ID; ID "pid" keeps prometheus_client's default
identifier (the worker's own pid). Worker N (0-based, in argument order)
labels its series worker="<its identifier>" and, every 20 ms, increments
the counter lv_jobs_total and observes 0.25 in the histogram
lv_latency_seconds; it sets the livesum gauges lv_busy (its own series) and
lv_workers (one series shared by all, so it sums them) to 1 and the
livemax gauge lv_peak to N + 1 once.

Talks to the test through files in CONTROL_DIR:
  writes ready-N   -> "<identifier> <pid>" once its first values are written
  pause            -> while it exists every worker holds still (writes
                      nothing) and writes paused-N containing what pause
                      contains, so the test knows the directory is still
  exit-N           -> worker N exits
  stop             -> every worker exits; so do they all after 120 s, so a
                      failed test never leaves them running
The launcher waits for every worker (none is left a zombie) and exits 0.
"""

import os
import sys
import time
import traceback

LIMIT = 120.0


def note(control, name, text):
    tmp = os.path.join(control, "." + name)
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(control, name))


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def worker(control, index, identifier):
    from prometheus_client import Counter, Gauge, Histogram, values

    if identifier != "pid":
        values.ValueClass = values.MultiProcessValue(process_identifier=lambda: identifier)
    label = identifier if identifier != "pid" else str(os.getpid())
    jobs = Counter("lv_jobs", "Jobs done.", ["worker"]).labels(worker=label)
    latency = Histogram(
        "lv_latency_seconds", "Latency.", ["worker"], buckets=(0.1, 0.5, 1.0)
    ).labels(worker=label)
    Gauge("lv_busy", "Busy.", ["worker"], multiprocess_mode="livesum").labels(worker=label).set(1)
    Gauge("lv_workers", "Running workers.", multiprocess_mode="livesum").set(1)
    Gauge("lv_peak", "Highest worker number.", multiprocess_mode="livemax").set(index + 1)
    jobs.inc()
    latency.observe(0.25)
    note(control, "ready-%d" % index, "%s %d" % (identifier, os.getpid()))

    pause = os.path.join(control, "pause")
    stop = os.path.join(control, "stop")
    leave = os.path.join(control, "exit-%d" % index)
    acknowledged = None
    deadline = time.time() + LIMIT
    while time.time() < deadline and not os.path.exists(stop) and not os.path.exists(leave):
        asked = read(pause)
        if asked is not None:
            if asked != acknowledged:
                note(control, "paused-%d" % index, asked)
                acknowledged = asked
            time.sleep(0.005)
            continue
        jobs.inc()
        latency.observe(0.25)
        time.sleep(0.02)


def main():
    control, identifiers = sys.argv[1], sys.argv[2:]
    pids = []
    for index, identifier in enumerate(identifiers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                worker(control, index, identifier)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    # Collected in whatever order they exit: a worker told to exit is gone
    # at once, not left a zombie behind one still running.
    failed = 0
    for _ in pids:
        _, status = os.wait()
        failed += status != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
