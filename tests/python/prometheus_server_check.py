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

from prometheus_client.parser import text_string_to_metric_families

from series_diff import differences
from prometheus_api import api, fetch, left_out, stored, until_agreed


def served(multiprom):
    """(name, labels) -> value, as multiprom serves them."""
    text = fetch(multiprom + "/metrics").decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if left_out(sample.name):
                continue
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def main():
    prometheus, multiprom = sys.argv[1], sys.argv[2]

    def agreed():
        up = api(prometheus, "query", query='up{job="multiprom"}')["result"]
        if [float(r["value"][1]) for r in up] != [1.0]:
            return False, f"up is {up}"
        want = served(multiprom)
        if not want:
            return False, "multiprom serves no series"
        got = stored(prometheus, "multiprom")
        diff = differences(got, want, "Prometheus", "multiprom")
        if diff:
            return False, "stored series differ:\n" + "\n".join(diff)
        print(f"Prometheus stored all {len(got)} series multiprom serves, equal")
        return True, None

    until_agreed(prometheus, ["multiprom"], agreed)


if __name__ == "__main__":
    main()
