"""What the checks against a real Prometheus server share: its HTTP API, and
the gunicorn workers under `multiprom run` (found through /proc)."""

import json
import os
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


# Series a comparison leaves out: multiprom's self-metrics, which change
# from scrape to scrape, and those Prometheus makes itself.
LEFT_OUT = ("multiprom_", "process_", "up", "scrape_")


def stored(prometheus, job):
    """(name, labels) -> value, as Prometheus stored them last for `job`,
    without the `job` and `instance` labels and the LEFT_OUT series."""
    series = {}
    for result in api(prometheus, "query", query=f'{{job="{job}"}}')["result"]:
        labels = dict(result["metric"])
        name = labels.pop("__name__")
        if name.startswith(LEFT_OUT):
            continue
        del labels["job"], labels["instance"]
        series[(name, tuple(sorted(labels.items())))] = float(result["value"][1])
    return series


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
