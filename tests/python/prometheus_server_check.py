"""Checks what a real Prometheus server stored from `multiprom serve`.

usage: prometheus_server_check.py PROMETHEUS_URL MULTIPROM_URL

Waits (at most 60 s) until Prometheus reports the `multiprom` job's target
up, with no scrape error, and its stored series equal, name for name, label
for label and value for value, what multiprom serves at /metrics (parsed by
prometheus_client's own text parser). multiprom's self-metrics
(`multiprom_*`, `process_*`) change from scrape to scrape and are left out,
as are the series Prometheus makes itself (`up`, `scrape_*`). Exits 1 with
the differences if they never agree.
"""

import sys
import time

from prometheus_client.parser import text_string_to_metric_families

from series_diff import differences
from prometheus_api import LEFT_OUT, api, fetch, stored

PATIENCE = 60.0


def served(multiprom):
    """(name, labels) -> value, as multiprom serves them."""
    text = fetch(multiprom + "/metrics").decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(LEFT_OUT):
                continue
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def main():
    prometheus, multiprom = sys.argv[1], sys.argv[2]
    deadline = time.monotonic() + PATIENCE
    state = "Prometheus did not answer"
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            targets = api(prometheus, "targets")["activeTargets"]
        except OSError as error:
            state = f"Prometheus did not answer: {error}"
            continue
        target = next((t for t in targets if t["labels"].get("job") == "multiprom"), None)
        if target is None or target["health"] != "up":
            state = f"target not up: {target}"
            continue
        if target["lastError"]:
            state = f"scrape error: {target['lastError']}"
            continue
        up = api(prometheus, "query", query='up{job="multiprom"}')["result"]
        if [float(r["value"][1]) for r in up] != [1.0]:
            state = f"up is {up}"
            continue
        want = served(multiprom)
        if not want:
            state = "multiprom serves no series"
            continue
        got = stored(prometheus, "multiprom")
        diff = differences(got, want, "Prometheus", "multiprom")
        if not diff:
            print(f"Prometheus stored all {len(got)} series multiprom serves, equal")
            return
        state = "stored series differ:\n" + "\n".join(diff)
    sys.exit(f"after {PATIENCE:.0f} s: {state}")


if __name__ == "__main__":
    main()
