"""A forking launcher like gunicorn: a master forks worker processes that
write metrics with the real prometheus_client; multiprom run is its parent,
so the workers are multiprom's grandchildren.

Usage: run_workers.py CONTROL_DIR WORKERS
Talks to the test through files in CONTROL_DIR:
  writes env     -> "<PROMETHEUS_MULTIPROC_DIR>\n<mode in octal>"
  writes ready   -> worker pids, one a line, once every worker has written
  waits  kill-one, then SIGKILLs worker 0 *without reaping it* (a zombie,
                   as when a master is slow to wait), writes killed -> its pid
  waits  finish, then stops the other workers and exits with status 3.
Every wait is bounded (60 s) so a failed test never leaves it running.
"""

import os
import signal
import sys
import time

LIMIT = 60.0


def note(control, name, text):
    tmp = os.path.join(control, "." + name)
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(control, name))


def wait_for(path):
    deadline = time.time() + LIMIT
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit("timed out waiting for " + path)
        time.sleep(0.01)


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2]


def worker(control, i):
    from prometheus_client import Counter, Gauge

    Counter("jobs", "Jobs done.").inc(i + 1)
    Gauge("busy_workers", "Busy workers.", multiprocess_mode="livesum").set(1)
    note(control, "worker-%d" % i, str(os.getpid()))
    deadline = time.time() + LIMIT
    while time.time() < deadline:
        time.sleep(0.05)


def main():
    control, workers = sys.argv[1], int(sys.argv[2])
    path = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    note(control, "env", "%s\n%o" % (path, os.stat(path).st_mode & 0o777))
    pids = []
    for i in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                worker(control, i)
            finally:
                os._exit(0)
        pids.append(pid)
    for i in range(workers):
        wait_for(os.path.join(control, "worker-%d" % i))
    note(control, "ready", "".join("%d\n" % p for p in pids))

    wait_for(os.path.join(control, "kill-one"))
    os.kill(pids[0], signal.SIGKILL)
    # SIGKILL is delivered asynchronously: say "killed" only once the worker
    # really is a zombie, so the test's next scrape sees it dead.
    deadline = time.time() + LIMIT
    while proc_state(pids[0]) != "Z":
        if time.time() > deadline:
            sys.exit("worker never became a zombie")
        time.sleep(0.005)
    note(control, "killed", str(pids[0]))

    wait_for(os.path.join(control, "finish"))
    for pid in pids[1:]:
        os.kill(pid, signal.SIGTERM)
    for pid in pids:
        os.waitpid(pid, 0)
    sys.exit(3)


if __name__ == "__main__":
    main()
