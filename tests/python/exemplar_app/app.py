"""A WSGI app for the exemplar test with a real Prometheus: plain
prometheus_client calls, with exemplars, in multiprocess mode; multiprom's
value class is installed by the start-up hook (MULTIPROM_INSTALL=writer),
not by this code.

GET /?trace=ID&v=SECONDS counts the request and observes SECONDS, both with
the exemplar {trace_id: ID}, and answers with the worker's pid.
"""

import os
import urllib.parse

from prometheus_client import Counter, Histogram, values

REQUESTS = Counter("app_requests", "Requests served.")
LATENCY = Histogram("app_latency_seconds", "Request latency.", buckets=(0.1, 0.5, 1.0))


def app(environ, start_response):
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    trace = query.get("trace", [""])[0]
    exemplar = {"trace_id": trace} if trace else None
    REQUESTS.inc(exemplar=exemplar)
    LATENCY.observe(float(query.get("v", ["0.05"])[0]), exemplar=exemplar)
    start_response("200 OK", [("Content-Type", "text/plain")])
    # Which value class wrote: the test refuses to pass on Python's own.
    writer = values.ValueClass.__module__
    return [f"{os.getpid()} {writer}\n".encode()]
