"""Native histograms from gunicorn workers, through `multiprom run` and
through the application's own /metrics, into real Prometheus servers
(tests/integration/prometheus_native_histograms.rs).

usage: prometheus_native_check.py NATIVE_PROMETHEUS_URL CLASSIC_PROMETHEUS_URL
                                  APP_PROMETHEUS_URL APP_URL RUN_PID
                                  EARLIER_REQUESTS SCHEMA
                                  [NATIVE_PROMETHEUS_3_URL]

NATIVE_PROMETHEUS scrapes `multiprom run` with native histograms enabled (it
negotiates the protobuf format), CLASSIC_PROMETHEUS the same without (text),
APP_PROMETHEUS the app's own /metrics (prometheus_client's handler over
multiprom's collector) with native histograms enabled; NATIVE_PROMETHEUS_3,
if given, is a Prometheus 3 scraping `multiprom run` with them. The app
(tests/python/native_app) observes the value each request names in a plain
prometheus_client Histogram. This script waits until the servers have stored
the EARLIER_REQUESTS observations made before it ran (each 0.05 s), then
sends a known sample of latencies, SIGKILLing one gunicorn worker half-way
and going on until gunicorn's replacement has served requests too. Then:

* on every native server, `histogram_count` and `histogram_sum` of the native
  series equal the count and the sum of every observation, and
  `histogram_quantile(q, sum(rate(...)))` for q in 0.5, 0.9, 0.99 lies within
  the schema's relative error (a bucket's width, 2^(2^-SCHEMA) - 1) of the
  observation of rank ceil(q n) among the n observed after the first scrape;
* the classic series (`_bucket`, `_count`, `_sum`) stored by the classic
  server hold exactly what the classic histogram of the same observations
  holds, and its classic `histogram_quantile` of them equals what those
  buckets give.

Prints one JSON object; exits 1 with what differs if anything never holds
within the patience.
"""

import json
import math
import os
import random
import signal
import sys
import time
from prometheus_api import fetch, api, children, workers

PATIENCE = 30.0
BOUNDS = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, math.inf]
QUANTILES = [0.5, 0.9, 0.99]
SENT = 300


def scalar(prometheus, query):
    """The one value `query` gives now, or None."""
    result = api(prometheus, "query", query=query)["result"]
    if len(result) != 1:
        return None
    return float(result[0]["value"][1])


def wait_until(what, check):
    """Polls `check` (returns (ok, state)) until ok, or exits saying `what`."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            ok, state = check()
        except OSError as error:
            ok, state = False, error
        if ok:
            return state
        if time.monotonic() > deadline:
            sys.exit(f"{what} never held: last seen {state}")
        time.sleep(0.3)


def close(a, b):
    return a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def main():
    native, classic, from_app, app = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    run_pid, earlier, schema = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    before = [0.05] * earlier
    natives = {"multiprom run": native, "the app's own /metrics": from_app}
    if len(sys.argv) > 8:
        natives["multiprom run, into Prometheus 3"] = sys.argv[8]

    # The servers hold the first observations before any of ours is made,
    # so a rate over the whole test covers exactly ours.
    for name, server in natives.items():
        wait_until(
            f"the native server scraping {name} storing the earlier observations",
            lambda server=server: (lambda c: (c == earlier, c))(
                scalar(server, "histogram_count(app_latency_seconds)")
            ),
        )
    wait_until(
        "the classic server storing the earlier observations",
        lambda: (lambda c: (c == earlier, c))(scalar(classic, "app_latency_seconds_count")),
    )

    rng = random.Random(7)
    values = [round(rng.lognormvariate(-2.0, 1.0), 6) for _ in range(SENT)]
    served = []
    for value in values[: SENT // 2]:
        served.append(int(fetch(f"{app}/?v={value}").split()[0]))
    seen = workers(run_pid)
    if len(seen) != 4:
        sys.exit(f"expected 4 gunicorn workers under {run_pid}, found {sorted(seen)}")
    victim = served[-1]
    os.kill(victim, signal.SIGKILL)

    def replaced():
        now = workers(run_pid)
        fresh = now - seen
        return victim not in now and len(now) == 4 and len(fresh) == 1, now - seen

    (newcomer,) = wait_until(f"gunicorn replacing worker {victim}", replaced)
    for value in values[SENT // 2 :]:
        served.append(int(fetch(f"{app}/?v={value}").split()[0]))
    by_newcomer = served.count(newcomer)
    if by_newcomer < 5:
        sys.exit(f"the new worker {newcomer} served {by_newcomer} of {SENT // 2} requests")

    everything = before + values
    count, total = len(everything), sum(everything)
    # The quantiles of what was observed after the first scrape.
    ordered = sorted(values)
    error = 2.0 ** (2.0 ** -schema) - 1.0
    held = {}
    for name, server in natives.items():
        got = wait_until(
            f"histogram_count == {count} and histogram_sum == {total} from {name}",
            lambda server=server: (
                lambda c, s: (c == count and close(s, total), (c, s))
            )(
                scalar(server, "histogram_count(app_latency_seconds)"),
                scalar(server, "histogram_sum(app_latency_seconds)"),
            ),
        )
        quantiles = {}
        for q in QUANTILES:
            expected = ordered[math.ceil(q * len(ordered)) - 1]
            estimate = scalar(
                server, f"histogram_quantile({q}, sum(rate(app_latency_seconds[1h])))")
            quantiles[str(q)] = {"observed": expected, "native": estimate}
            if estimate is None or abs(estimate - expected) > error * expected * (1 + 1e-9):
                sys.exit(
                    f"histogram_quantile({q}) from {name} is {estimate}; the observations' "
                    f"is {expected}, allowed relative error {error:.4f} (schema {schema})"
                )
        held[name] = {"count": got[0], "sum": got[1], "quantiles": quantiles}

    # The classic histogram, as the classic server stores it.
    def classic_holds():
        state = {}
        for bound in BOUNDS:
            le = "+Inf" if bound == math.inf else repr(bound)
            want = sum(1 for v in everything if v <= bound)
            have = scalar(classic, f'app_latency_seconds_bucket{{le="{le}"}}')
            state[le] = (have, want)
        c = scalar(classic, "app_latency_seconds_count")
        s = scalar(classic, "app_latency_seconds_sum")
        state["count"], state["sum"] = (c, count), (s, total)
        ok = all(h == w for le, (h, w) in state.items() if le != "sum") and close(s, total)
        return ok, state

    classic_state = wait_until("the classic series holding every observation", classic_holds)
    # Classic quantile: the linear interpolation Prometheus does, on the
    # cumulative buckets of every observation. (Over a rate, each bucket
    # series is extrapolated on its own, by factors that differ a little,
    # so the instant buckets are what can be known exactly.)
    classic_quantiles = {}
    for q in QUANTILES:
        estimate = scalar(
            classic, f"histogram_quantile({q}, sum by (le) (app_latency_seconds_bucket))"
        )
        expected = classic_quantile(q, everything)
        classic_quantiles[str(q)] = {"classic": estimate, "expected": expected}
        if estimate is None or not math.isclose(estimate, expected, rel_tol=1e-9):
            sys.exit(f"classic histogram_quantile({q}) is {estimate}, expected {expected}")

    print(json.dumps({
        "count": held["multiprom run"]["count"],
        "sum": held["multiprom run"]["sum"],
        "app_count": held["the app's own /metrics"]["count"],
        "killed": victim,
        "newcomer": newcomer,
        "served_by_newcomer": by_newcomer,
        "quantiles": held["multiprom run"]["quantiles"],
        "app_quantiles": held["the app's own /metrics"]["quantiles"],
        "prometheus_3_count": held.get("multiprom run, into Prometheus 3", {}).get("count"),
        "classic": {k: v for k, v in classic_state.items()},
        "classic_quantiles": classic_quantiles,
    }))


def classic_quantile(q, values):
    """Prometheus's histogram_quantile on classic cumulative buckets."""
    cumulative = [sum(1 for v in values if v <= b) for b in BOUNDS]
    rank = q * cumulative[-1]
    i = next(n for n, c in enumerate(cumulative) if c >= rank)
    if BOUNDS[i] == math.inf:
        return BOUNDS[-2]
    lower = 0.0 if i == 0 else BOUNDS[i - 1]
    below = 0 if i == 0 else cumulative[i - 1]
    return lower + (BOUNDS[i] - lower) * (rank - below) / (cumulative[i] - below)


if __name__ == "__main__":
    main()
