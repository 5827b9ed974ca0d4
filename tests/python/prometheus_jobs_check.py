"""Checks that a real Prometheus server stored the same series from two of
its scrape jobs (tests/integration/prometheus_server.rs).

usage: prometheus_jobs_check.py PROMETHEUS_URL JOB JOB

Waits (at most 60 s) until both jobs' targets are up with no scrape error
and have stored series, then until the two hold the same series, name for
name, label for label and value for value. multiprom's self-metrics
(`multiprom_*`, `process_*`) and the series Prometheus makes itself (`up`,
`scrape_*`) are left out, and so are the `job` and `instance` labels.
Prints the stored names, one per line, and exits 0; else exits 1 with
the differences.
"""

import sys
import time

from series_diff import differences
from prometheus_api import api, stored

PATIENCE = 60.0


def main():
    prometheus, first, second = sys.argv[1], sys.argv[2], sys.argv[3]
    deadline = time.monotonic() + PATIENCE
    state = "Prometheus did not answer"
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            targets = api(prometheus, "targets")["activeTargets"]
        except OSError as error:
            state = f"Prometheus did not answer: {error}"
            continue
        jobs = {t["labels"].get("job"): t for t in targets}
        problems = [f"{job}: {jobs.get(job)}" for job in (first, second)
                    if job not in jobs or jobs[job]["health"] != "up" or jobs[job]["lastError"]]
        if problems:
            state = "targets not up: " + "; ".join(problems)
            continue
        ours, theirs = stored(prometheus, first), stored(prometheus, second)
        if not ours or not theirs:
            state = "no series stored yet"
            continue
        diff = differences(ours, theirs, first, second)
        if not diff:
            for name in sorted({name for name, _ in ours}):
                print(name)
            return
        state = "stored series differ:\n" + "\n".join(diff)
    sys.exit(f"after {PATIENCE:.0f} s: {state}")


if __name__ == "__main__":
    main()
