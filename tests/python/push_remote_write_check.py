"""Prometheus Remote-Write from `multiprom run -- gunicorn -w 4` into a real
Prometheus 3 (tests/integration/push_remote_write.rs), which this script
starts, stops for a while, and starts again.

usage: push_remote_write_check.py PROMETHEUS_BINARY WORK_DIR PORT METRICS_URL APP_URL OUTAGE_SECONDS
                                  EARLIER_REQUESTS

`multiprom run` pushes every second to http://127.0.0.1:PORT/api/v1/write;
the app is tests/python/push_app. With the load stopped, the series
Prometheus stored must equal a scrape of multiprom's /metrics (every app_*
sample: counters, the gauge, the classic histogram's buckets, count and
sum), the native histogram's count and sum the classic ones, and the last
exemplar of each route must be among the stored exemplars. That holds:

1. after requests with exemplars;
2. after a worker is SIGKILLed and gunicorn's replacement has served
   requests (and no counter went down: `resets()` is 0);
3. after Prometheus was stopped for OUTAGE_SECONDS while requests went on:
   the stored total grew by exactly the requests made meanwhile.

The stored total of requests must be every request answered, the
EARLIER_REQUESTS made before this script ran included.

Prints one JSON object; exits 1 with what differs if anything never holds
within the patience.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

PATIENCE = 60


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def get(url, accept=None):
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


class Prometheus:
    def __init__(self, binary, work, port):
        self.binary, self.work, self.port = binary, work, port
        self.url = f"http://127.0.0.1:{port}"
        self.process = None
        with open(os.path.join(work, "prometheus.yml"), "w") as config:
            config.write("global:\n  scrape_interval: 15s\n")

    def start(self):
        log = open(os.path.join(self.work, "prometheus.log"), "a")
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={os.path.join(self.work, 'prometheus.yml')}",
                f"--storage.tsdb.path={os.path.join(self.work, 'data')}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-remote-write-receiver",
                "--enable-feature=exemplar-storage,native-histograms",
            ],
            stdout=log,
            stderr=log,
        )
        wait_until("Prometheus ready", lambda: self.ready() or None)

    def ready(self):
        try:
            return get(f"{self.url}/-/ready") is not None
        except OSError:
            return False

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=PATIENCE)

    def query(self, expr):
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        return json.loads(get(url))["data"]["result"]

    def exemplars(self, expr):
        now = time.time()
        url = f"{self.url}/api/v1/query_exemplars?" + urllib.parse.urlencode(
            {"query": expr, "start": now - 3600, "end": now + 60}
        )
        return json.loads(get(url))["data"]

    def log(self):
        with open(os.path.join(self.work, "prometheus.log")) as log:
            return log.read()[-4000:]


def wait_until(what, check):
    deadline = time.time() + PATIENCE
    last = None
    while time.time() < deadline:
        try:
            last = check()
        except OSError as e:
            last = f"error: {e}"
        if last is True or (last is not None and not isinstance(last, str) and last):
            return last
        time.sleep(0.5)
    fail(f"{what}: never held; last: {last}")


def scraped(metrics_url):
    """Every app_* sample multiprom serves: {(name, labels): value}."""
    out = {}
    for family in text_string_to_metric_families(get(metrics_url, "text/plain")):
        for sample in family.samples:
            if sample.name.startswith("app_"):
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def stored(prometheus):
    """Every app_* float series Prometheus holds now."""
    out = {}
    for series in prometheus.query('{__name__=~"app_.+"}'):
        labels = dict(series["metric"])
        name = labels.pop("__name__")
        if "value" in series:
            out[(name, tuple(sorted(labels.items())))] = float(series["value"][1])
    return out


def natives(prometheus):
    """The native histogram's count and sum, as Prometheus stored them."""
    result = prometheus.query("app_latency_seconds")
    histograms = [r["histogram"][1] for r in result if "histogram" in r]
    if len(histograms) != 1:
        return None
    return float(histograms[0]["count"]), float(histograms[0]["sum"])


def stored_equals_scraped(prometheus, metrics_url, what):
    def check():
        want, have = scraped(metrics_url), stored(prometheus)
        if want != have:
            missing = {k: v for k, v in want.items() if have.get(k) != v}
            extra = {k: v for k, v in have.items() if k not in want}
            return f"differs: scraped but not stored so {missing}; stored only {extra}"
        native = natives(prometheus)
        count = want[("app_latency_seconds_count", ())]
        total = want[("app_latency_seconds_sum", ())]
        if native is None or native[0] != count or abs(native[1] - total) > 1e-9 * max(1, total):
            return f"native histogram {native} is not count {count}, sum {total}"
        return want

    return wait_until(f"{what}: stored series equal the scrape", check)


def main():
    binary, work, port, metrics_url, app_url, outage, earlier = sys.argv[1:8]
    outage = float(outage)
    prometheus = Prometheus(binary, work, int(port))
    prometheus.start()
    said = {}
    try:
        sent = int(earlier)
        pids = set()

        def request(route, seconds, trace=""):
            nonlocal sent
            query = urllib.parse.urlencode({"route": route, "v": seconds, "trace": trace})
            pid = int(get(f"{app_url}/?{query}"))
            sent += 1
            pids.add(pid)
            return pid

        # 1. Requests with exemplars.
        last_trace = {}
        for i in range(40):
            route = ("/a", "/b", "/c")[i % 3]
            trace = f"{i:032x}"
            request(route, (0.03, 0.07, 0.3, 0.7, 2.0)[i % 5], trace)
            last_trace[route] = trace
        first = stored_equals_scraped(prometheus, metrics_url, "after the first requests")
        said["first_total"] = sum(v for (n, _), v in first.items() if n == "app_requests_total")

        def exemplars_hold():
            for route, trace in last_trace.items():
                data = prometheus.exemplars(f'app_requests_total{{route="{route}"}}')
                traces = {e["labels"].get("trace_id") for d in data for e in d["exemplars"]}
                if trace not in traces:
                    return f"{route}: {trace} not among {sorted(traces)}"
            return True

        wait_until("the last exemplar of each route is stored", exemplars_hold)

        # 2. A worker killed; gunicorn's replacement serves too.
        victim = request("/a", 0.03)
        before = set(pids)
        os.kill(victim, signal.SIGKILL)
        deadline = time.time() + PATIENCE
        # A request the killed worker had accepted fails on our side and was
        # never counted: only answered requests are.
        while not (pids - before) or sent < 120:
            if time.time() > deadline:
                fail(f"no new worker answered after the kill ({sent} requests)")
            try:
                request("/b", 0.2, f"{sent:032x}")
            except OSError:
                pass
        second = stored_equals_scraped(prometheus, metrics_url, "after a worker was killed")
        said["second_total"] = sum(v for (n, _), v in second.items() if n == "app_requests_total")
        if said["second_total"] != sent:
            fail(f"the stored total {said['second_total']} is not the {sent} requests sent")
        resets = prometheus.query("sum(resets(app_requests_total[10m]))")
        if resets and float(resets[0]["value"][1]) != 0:
            fail(f"a counter went down across the kill: {resets}")

        # 3. The receiver away for a while; requests go on.
        total_before = said["second_total"]
        prometheus.stop()
        during = 0
        end = time.time() + outage
        while time.time() < end:
            request("/c", 0.06)
            during += 1
            time.sleep(0.5)
        prometheus.start()
        third = stored_equals_scraped(prometheus, metrics_url, "after the receiver came back")
        said["third_total"] = sum(v for (n, _), v in third.items() if n == "app_requests_total")
        said["during_outage"] = during
        if said["third_total"] - total_before != during:
            fail(f"stored total grew by {said['third_total'] - total_before}, not {during}")
        resets = prometheus.query("sum(resets(app_requests_total[10m]))")
        if resets and float(resets[0]["value"][1]) != 0:
            fail(f"a counter went down across the outage: {resets}")
        said["requests"] = sent
    except SystemExit:
        print(prometheus.log(), file=sys.stderr)
        raise
    finally:
        if prometheus.process and prometheus.process.poll() is None:
            prometheus.stop()
    print(json.dumps(said))


if __name__ == "__main__":
    main()
