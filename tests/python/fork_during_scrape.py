"""Forks while other threads scrape through multiprom's collector, and
checks that every child's own first scrape answers (gunicorn forks a new
worker whenever one recycles, whatever the master's threads are doing).
Each child gets 10 s: SIGALRM with its default action ends a child that
hangs (a Python handler would never run while the child waits inside the
extension). Exits 0 when
every child scraped, 1 otherwise, with the counts on stderr.
Usage: fork_during_scrape.py FORKS (PROMETHEUS_MULTIPROC_DIR set).
"""

import os
import signal
import sys
import threading
import time

import multiprom

multiprom.install()

from prometheus_client import CollectorRegistry, Counter, generate_latest  # noqa: E402
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402

for i in range(300):
    Counter(f"c{i}", "A counter.").inc()

stop = False


def scrape_forever():
    while not stop:
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        generate_latest(registry)


def child():
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(10)
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    ok = b"c299_total 1.0" in generate_latest(registry)
    os._exit(0 if ok else 4)


def main():
    global stop
    forks = int(sys.argv[1])
    threads = [threading.Thread(target=scrape_forever) for _ in range(2)]
    for thread in threads:
        thread.start()
    codes = []
    for _ in range(forks):
        time.sleep(0.01)
        pid = os.fork()
        if pid == 0:
            child()
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    stop = True
    for thread in threads:
        thread.join()
    print(f"child exit codes: {codes}", file=sys.stderr)
    return 0 if all(code == 0 for code in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
