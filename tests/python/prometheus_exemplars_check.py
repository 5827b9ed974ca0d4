"""Exemplars from gunicorn workers, through `multiprom run`, into a real
Prometheus server with exemplar storage (tests/integration/prometheus_exemplars.rs).

usage: prometheus_exemplars_check.py PROMETHEUS_URL APP_URL RUN_PID EARLIER_REQUESTS

The app (tests/python/exemplar_app) records every request's trace id as an
exemplar on `app_requests_total` and on the `app_latency_seconds` bucket its
value falls in. One request at a time, this script sends a trace id and
waits until Prometheus's `/api/v1/query_exemplars` returns it on the
counter and on exactly that bucket. Half-way it SIGKILLs one gunicorn worker
(found under RUN_PID, `multiprom run`'s pid), waits for gunicorn to start a
new one, and goes on until that new worker has served requests whose trace
ids Prometheus returns too. At the end every trace id sent must be stored,
on the right series, and `app_requests_total` must count every request
(EARLIER_REQUESTS were made before this script, without a trace id).

Prints one JSON object; exits 1 with what is missing if anything never
shows up within the patience.
"""

import json
import os
import signal
import sys
import time
from prometheus_api import fetch, api, children, workers

PATIENCE = 30.0
# (observed value, the bucket it falls in)
VALUES = [(0.05, "0.1"), (0.3, "0.5"), (0.7, "1.0"), (3.0, "+Inf")]


def stored_exemplars(prometheus, query, start):
    """trace id -> series labels (without job and instance) it is stored on."""
    found = {}
    for series in api(prometheus, "query_exemplars", query=query, start=start, end=time.time() + 60):
        labels = dict(series["seriesLabels"])
        for key in ("job", "instance"):
            labels.pop(key, None)
        for exemplar in series["exemplars"]:
            trace = exemplar["labels"].get("trace_id")
            found.setdefault(trace, []).append(labels)
    return found


def main():
    prometheus, app, run_pid, earlier = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    start = time.time() - 5
    deadline = time.monotonic() + 60
    while True:
        try:
            targets = api(prometheus, "targets")["activeTargets"]
            if targets and targets[0]["health"] == "up" and not targets[0]["lastError"]:
                break
            state = targets
        except OSError as error:
            state = error
        if time.monotonic() > deadline:
            sys.exit(f"the multiprom target never came up: {state}")
        time.sleep(0.5)

    sent = []  # (trace id, bucket, worker pid)
    writers = set()

    def send(trace, value, bucket):
        answer = fetch(f"{app}/?trace={trace}&v={value}").decode().split()
        pid, writer = int(answer[0]), answer[1]
        writers.add(writer)
        sent.append((trace, bucket, pid))
        # One exemplar per series is exposed at a time: wait until this one
        # is stored before the next replaces it.
        wait_deadline = time.monotonic() + PATIENCE
        while True:
            counter = stored_exemplars(prometheus, "app_requests_total", start)
            buckets = stored_exemplars(prometheus, "app_latency_seconds_bucket", start)
            on_counter = counter.get(trace) == [{"__name__": "app_requests_total"}]
            on_bucket = buckets.get(trace) == [{"__name__": "app_latency_seconds_bucket", "le": bucket}]
            if on_counter and on_bucket:
                return pid
            if time.monotonic() > wait_deadline:
                sys.exit(
                    f"trace {trace} (worker {pid}, bucket {bucket}) never stored as sent: "
                    f"on the counter {counter.get(trace)}, on buckets {buckets.get(trace)}"
                )
            time.sleep(0.2)

    for i in range(4):
        value, bucket = VALUES[i % len(VALUES)]
        send(f"before-{i}", value, bucket)

    before = workers(run_pid)
    if len(before) != 4:
        sys.exit(f"expected 4 gunicorn workers under {run_pid}, found {sorted(before)}")
    victim = sent[-1][2]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + PATIENCE
    while True:
        now = workers(run_pid)
        fresh = now - before
        if victim not in now and len(now) == 4 and fresh:
            break
        if time.monotonic() > deadline:
            sys.exit(f"gunicorn did not replace worker {victim}: workers {sorted(now)}")
        time.sleep(0.1)
    (newcomer,) = fresh

    served_by_newcomer = 0
    i = 0
    while served_by_newcomer < 2:
        value, bucket = VALUES[i % len(VALUES)]
        if send(f"after-{i}", value, bucket) == newcomer:
            served_by_newcomer += 1
        i += 1
        if i > 200:
            sys.exit(f"the new worker {newcomer} served none of 200 requests")

    # Everything sent is stored, on its series, and the counter counts all.
    counter = stored_exemplars(prometheus, "app_requests_total", start)
    buckets = stored_exemplars(prometheus, "app_latency_seconds_bucket", start)
    missing = [t for t, _, _ in sent if t not in counter or t not in buckets]
    if missing:
        sys.exit(f"trace ids no longer stored: {missing}")
    deadline = time.monotonic() + PATIENCE
    while True:
        result = api(prometheus, "query", query="app_requests_total")["result"]
        total = float(result[0]["value"][1]) if result else None
        if total == len(sent) + earlier:
            break
        if time.monotonic() > deadline:
            sys.exit(f"app_requests_total is {total}, {len(sent) + earlier} requests were made")
        time.sleep(0.2)
    print(json.dumps({
        "sent": len(sent),
        "killed": victim,
        "newcomer": newcomer,
        "served_by_newcomer": served_by_newcomer,
        "workers_seen": sorted({pid for _, _, pid in sent}),
        "writers": sorted(writers),
        "requests_total": total,
    }))


if __name__ == "__main__":
    main()
