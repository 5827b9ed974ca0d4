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

from series_diff import differences
from prometheus_api import stored, until_agreed


def main():
    prometheus, first, second = sys.argv[1], sys.argv[2], sys.argv[3]

    def agreed():
        ours, theirs = stored(prometheus, first), stored(prometheus, second)
        if not ours or not theirs:
            return False, "no series stored yet"
        diff = differences(ours, theirs, first, second)
        if diff:
            return False, "stored series differ:\n" + "\n".join(diff)
        for name in sorted({name for name, _ in ours}):
            print(name)
        return True, None

    until_agreed(prometheus, [first, second], agreed)


if __name__ == "__main__":
    main()
