"""A WSGI app for the native histogram test with a real Prometheus: a plain
prometheus_client Histogram in multiprocess mode, and the application's own
/metrics as prometheus_client's multiprocess recipe serves it. Native
recording and multiprom's collector are turned on by the start-up hook
(MULTIPROM_INSTALL=collector,native-histograms), not by this code, which is
what any application already has.

GET /?v=SECONDS observes SECONDS and answers with the worker's pid;
GET /metrics answers with every worker's metrics, merged.
"""

import os
import urllib.parse

from prometheus_client import CollectorRegistry, Histogram, make_wsgi_app
from prometheus_client.multiprocess import MultiProcessCollector

LATENCY = Histogram(
    "app_latency_seconds", "Request latency.", buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
)

registry = CollectorRegistry()
MultiProcessCollector(registry)
metrics = make_wsgi_app(registry)


def app(environ, start_response):
    if environ.get("PATH_INFO") == "/metrics":
        return metrics(environ, start_response)
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    LATENCY.observe(float(query.get("v", ["0.05"])[0]))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"{os.getpid()}\n".encode()]
