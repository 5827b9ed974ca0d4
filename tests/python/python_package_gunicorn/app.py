"""prometheus_client's documented gunicorn recipe, unchanged: the app knows
nothing of multiprom (tests/integration/python_package.rs starts it with and
without MULTIPROM_INSTALL=1)."""

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client import multiprocess

REQUESTS = Counter("app_requests", "Requests served.")


def app(environ, start_response):
    if environ["PATH_INFO"] == "/metrics":
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        data = generate_latest(registry)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST),
                                  ("Content-Length", str(len(data)))])
        return iter([data])
    REQUESTS.inc()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]
