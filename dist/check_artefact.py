"""Checks one installed multiprom where it would run (dist/check.sh runs it
inside a Debian root, under qemu-user, or on this machine).

Usage: check_artefact.py MULTIPROM VERSION [--python-package] [--port PORT]

MULTIPROM is the command to check (a tarball's binary, or the `multiprom`
a wheel put in this venv); the interpreter running this script has
prometheus_client (and, with --python-package, multiprom) installed.

  * `MULTIPROM --version` prints `multiprom VERSION`;
  * `MULTIPROM scrape` of a directory written by prometheus_client workers
    here is byte for byte what prometheus_client's own collector prints;
  * `MULTIPROM run -- python app` serves the merged metrics of workers the
    app forks;
  * with --python-package: MULTIPROM_INSTALL=collector,writer puts
    multiprom's collector and writer in place in every process of a small
    multi-process app, whose merged totals come out right.

Prints one line per check; exits 1 at the first that fails. Every wait is
bounded, so a failure never hangs.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request

LIMIT = 120  # seconds, for any one command (qemu-user is slow)

WRITER = textwrap.dedent(
    """
    import os, sys
    from prometheus_client import Counter, Gauge, Histogram, Summary
    worker = int(sys.argv[1])
    c = Counter("jobs", "Jobs done", ["queue"])
    g = Gauge("in_flight", "Requests in flight", multiprocess_mode="livesum")
    m = Gauge("kv_usage", "KV cache use", multiprocess_mode="max")
    h = Histogram("latency_seconds", "Latency", buckets=[0.1, 0.5, 2.5])
    s = Summary("payload_bytes", "Payload sizes")
    for i in range(50 + worker):
        c.labels(queue="q%d" % (i % 3)).inc(1.5)
        h.observe(i / 40.0)
        s.observe(i * 7)
    g.inc(worker + 1)
    m.set(0.25 * worker)
    """
)

# A forking app: the master forks two workers that write metrics and wait;
# the master polls `run`'s endpoint until both workers' counts are in.
RUN_APP = textwrap.dedent(
    """
    import os, sys, time, urllib.request
    port = sys.argv[1]
    pids = []
    for w in range(2):
        pid = os.fork()
        if pid == 0:
            from prometheus_client import Counter
            Counter("forked_jobs", "Jobs", ["worker"]).labels(worker=str(w)).inc(10 + w)
            time.sleep(60)
            os._exit(0)
        pids.append(pid)
    deadline = time.time() + 100
    body = ""
    while time.time() < deadline:
        try:
            body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5).read().decode()
        except OSError:
            body = ""
        if 'forked_jobs_total{worker="0"} 10.0' in body and 'forked_jobs_total{worker="1"} 11.0' in body:
            break
        time.sleep(0.2)
    for pid in pids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    print(body)
    sys.exit(0 if 'forked_jobs_total{worker="1"} 11.0' in body else 3)
    """
)

# MULTIPROM_INSTALL=collector,writer: every process (the pool's workers too)
# gets multiprom's writer from the wheel's .pth hook; the parent merges with
# what is now prometheus_client's MultiProcessCollector, multiprom's.
INSTALL_APP = textwrap.dedent(
    """
    import multiprocessing, sys
    import multiprom
    import prometheus_client.multiprocess as mp
    import prometheus_client.values as values
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    # Made before the pool forks, as in an app preloaded by its server.
    JOBS = Counter("installed_jobs", "Jobs")

    def work(n):
        assert values.MultiProcessValue is multiprom.MultiProcessValue, "writer not installed in a worker"
        JOBS.inc(n)
        return n

    if __name__ == "__main__":
        assert mp.MultiProcessCollector is multiprom.MultiProcessCollector, "collector not installed"
        assert values.MultiProcessValue is multiprom.MultiProcessValue, "writer not installed"
        with multiprocessing.get_context("fork").Pool(3) as pool:
            total = sum(pool.map(work, range(1, 11)))
        registry = CollectorRegistry()
        mp.MultiProcessCollector(registry)
        text = generate_latest(registry).decode()
        line = "installed_jobs_total %.1f" % total
        assert line in text, text
        print(line)
    """
)


def run(cmd, env=None, timeout=LIMIT):
    out = subprocess.run(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout
    )
    return out.returncode, out.stdout.decode(), out.stderr.decode()


def fail(what, detail):
    print("FAIL %s\n%s" % (what, detail))
    sys.exit(1)


def env_with(**extra):
    env = dict(os.environ)
    env.pop("MULTIPROM_INSTALL", None)
    env.update(extra)
    return env


def check_version(multiprom, version):
    code, out, err = run([multiprom, "--version"])
    if code != 0 or out.strip() != "multiprom " + version:
        fail("--version", "exit %d, %r %r" % (code, out, err))
    print("ok   --version: %s" % out.strip())


def check_scrape(multiprom, work):
    metrics = os.path.join(work, "scrape")
    os.mkdir(metrics)
    env = env_with(PROMETHEUS_MULTIPROC_DIR=metrics)
    script = os.path.join(work, "writer.py")
    with open(script, "w") as f:
        f.write(WRITER)
    for worker in range(3):
        code, out, err = run([sys.executable, script, str(worker)], env=env)
        if code != 0:
            fail("prometheus_client writer", err)
    python = (
        "from prometheus_client import CollectorRegistry, generate_latest\n"
        "from prometheus_client.multiprocess import MultiProcessCollector\n"
        "import sys\n"
        "r = CollectorRegistry()\n"
        "MultiProcessCollector(r)\n"
        "sys.stdout.write(generate_latest(r).decode())\n"
    )
    code, expected, err = run([sys.executable, "-c", python], env=env)
    if code != 0 or "jobs_total" not in expected:
        fail("prometheus_client collector", err)
    code, got, err = run([multiprom, "scrape", "--dir", metrics], env=env)
    if code != 0 or got != expected:
        fail(
            "scrape",
            "exit %d\n--- prometheus_client\n%s\n--- multiprom\n%s\n%s"
            % (code, expected, got, err),
        )
    print("ok   scrape: %d bytes, identical to prometheus_client's" % len(got))


def check_run(multiprom, work, port):
    script = os.path.join(work, "forking_app.py")
    with open(script, "w") as f:
        f.write(RUN_APP)
    code, out, err = run(
        [multiprom, "run", "--listen", "127.0.0.1:%d" % port, "--", sys.executable, script, str(port)],
        env=env_with(),
    )
    # The app prints what run's endpoint served: both workers' samples.
    served = ['forked_jobs_total{worker="0"} 10.0', 'forked_jobs_total{worker="1"} 11.0']
    if code != 0 or not all(line in out.splitlines() for line in served):
        fail("run", "exit %d\n%s\n%s" % (code, out, err))
    print("ok   run: the forked workers' metrics served while they ran")


def check_install(work):
    metrics = os.path.join(work, "install")
    os.mkdir(metrics)
    script = os.path.join(work, "install_app.py")
    with open(script, "w") as f:
        f.write(INSTALL_APP)
    code, out, err = run(
        [sys.executable, script],
        env=env_with(PROMETHEUS_MULTIPROC_DIR=metrics, MULTIPROM_INSTALL="collector,writer"),
    )
    if code != 0 or "RuntimeWarning" in err:
        fail("MULTIPROM_INSTALL=collector,writer", "exit %d\n%s\n%s" % (code, out, err))
    print("ok   MULTIPROM_INSTALL=collector,writer: %s" % out.strip())


def main():
    args = sys.argv[1:]
    python_package = "--python-package" in args
    port = 19478
    if "--port" in args:
        port = int(args[args.index("--port") + 1])
    multiprom, version = args[0], args[1]
    work = tempfile.mkdtemp(prefix="multiprom-check-")
    started = time.time()
    check_version(multiprom, version)
    check_scrape(multiprom, work)
    check_run(multiprom, work, port)
    if python_package:
        check_install(work)
    print("ok   all checks in %.0f s" % (time.time() - started))


if __name__ == "__main__":
    main()
