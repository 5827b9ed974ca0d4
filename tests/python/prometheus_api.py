"""What the checks against a real Prometheus server share: its HTTP API, and
the gunicorn workers under `multiprom run` (found through /proc)."""

import json
import os
import sys
import time
import urllib.parse
import urllib.request


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def api(prometheus, path, **params):
    """The `data` of Prometheus's answer to /api/v1/PATH?PARAMS."""
    url = f"{prometheus}/api/v1/{path}?" + urllib.parse.urlencode(params)
    answer = json.loads(fetch(url))
    if answer.get("status") != "success":
        raise RuntimeError(f"{url}: {answer}")
    return answer["data"]


def left_out(name):
    """Whether a comparison leaves the series `name` out: multiprom's
    self-metrics, which change from scrape to scrape, and the series
    Prometheus makes itself."""
    return name.startswith(("multiprom_", "process_", "scrape_")) or name == "up"


def stored(prometheus, job):
    """(name, labels) -> value, as Prometheus stored them last for `job`,
    without the `job` and `instance` labels and the series left out."""
    series = {}
    for result in api(prometheus, "query", query=f'{{job="{job}"}}')["result"]:
        labels = dict(result["metric"])
        name = labels.pop("__name__")
        if left_out(name):
            continue
        del labels["job"], labels["instance"]
        series[(name, tuple(sorted(labels.items())))] = float(result["value"][1])
    return series


def until_agreed(prometheus, jobs, check, patience=60.0):
    """Polls every 0.5 s until the targets of `jobs` are up with no scrape
    error and `check()` says `(True, _)`; exits 1 after `patience` seconds
    with the last state (`check`'s second value, or what was wrong)."""
    deadline = time.monotonic() + patience
    state = "Prometheus did not answer"
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            targets = api(prometheus, "targets")["activeTargets"]
        except OSError as error:
            state = f"Prometheus did not answer: {error}"
            continue
        by_job = {t["labels"].get("job"): t for t in targets}
        problems = [f"{job}: {by_job.get(job)}" for job in jobs
                    if job not in by_job or by_job[job]["health"] != "up"
                    or by_job[job]["lastError"]]
        if problems:
            state = "targets not up or failing: " + "; ".join(problems)
            continue
        done, state = check()
        if done:
            return
    sys.exit(f"after {patience:.0f} s: {state}")


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces: the parent pid follows the ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def workers(run_pid):
    """gunicorn's workers: the children of gunicorn's master, which is the
    one child of `multiprom run`."""
    return {w for m in children(run_pid) for w in children(m)}
