"""Checks that node_exporter's textfile collector publishes a `.prom` file
written by `multiprom scrape` as it is.

usage: textfile_check.py NODE_EXPORTER_URL PROM_FILE

Waits (at most 60 s) until node_exporter's /metrics has
`node_textfile_scrape_error 0` and every series of PROM_FILE (parsed by
prometheus_client's text parser) with an equal value, and no other series
of the file's families. Exits 1 with the differences otherwise.
"""

import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from series_diff import differences

PATIENCE = 60.0


def labels_key(labels):
    """Labels as a sorted tuple; `le` and `quantile` as numbers, since
    node_exporter parses a histogram's or summary's bounds and prints them
    its own way (`1.0` becomes `1`)."""
    return tuple(sorted(
        (name, float(value) if name in ("le", "quantile") else value)
        for name, value in labels.items()))


def series(text, names=None):
    """(sample name, labels) -> value, of the families in `names` if given;
    and the family names."""
    samples, families = {}, set()
    for family in text_string_to_metric_families(text):
        if names is not None and family.name not in names:
            continue
        families.add(family.name)
        for sample in family.samples:
            samples[(sample.name, labels_key(sample.labels))] = sample.value
    return samples, families


def main():
    url, prom_file = sys.argv[1], sys.argv[2]
    with open(prom_file) as f:
        want, names = series(f.read())
    if not want:
        sys.exit(f"{prom_file} has no series")
    deadline = time.monotonic() + PATIENCE
    state = "node_exporter did not answer"
    while time.monotonic() < deadline:
        time.sleep(0.3)
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
                text = response.read().decode()
        except OSError as error:
            state = f"node_exporter did not answer: {error}"
            continue
        errors, _ = series(text, {"node_textfile_scrape_error"})
        if list(errors.values()) != [0.0]:
            state = f"node_textfile_scrape_error is {errors}"
            continue
        got, _ = series(text, names)
        diff = differences(got, want, "node_exporter", "the file")
        if not diff:
            print(f"node_exporter publishes all {len(want)} series of the file, equal")
            return
        state = "series differ:\n" + "\n".join(diff)
    sys.exit(f"after {PATIENCE:.0f} s: {state}")


if __name__ == "__main__":
    main()
