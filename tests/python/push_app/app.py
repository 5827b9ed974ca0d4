"""A WSGI app for the push tests with real receivers: plain
prometheus_client calls in multiprocess mode; multiprom's value class and
native histogram recording are installed by the start-up hook
(MULTIPROM_INSTALL=writer,native-histograms), not by this code.

GET /?route=R&v=SECONDS&trace=ID counts the request by route, observes
SECONDS (both with the exemplar {trace_id: ID} when given), sets the
worker's in-flight gauge, and answers with the worker's pid.
"""

import os
import urllib.parse

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter("app_requests", "Requests served.", ["route"])
LATENCY = Histogram(
    "app_latency_seconds", "Request latency.", buckets=(0.05, 0.1, 0.25, 0.5, 1.0)
)
LAST = Gauge("app_last_latency_seconds", "The last latency seen.", multiprocess_mode="mostrecent")


def app(environ, start_response):
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    trace = query.get("trace", [""])[0]
    exemplar = {"trace_id": trace} if trace else None
    seconds = float(query.get("v", ["0.05"])[0])
    REQUESTS.labels(query.get("route", ["/"])[0]).inc(exemplar=exemplar)
    LATENCY.observe(seconds, exemplar=exemplar)
    LAST.set(seconds)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"{os.getpid()}\n".encode()]
