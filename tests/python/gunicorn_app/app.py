"""A WSGI app for the gunicorn tests: every request counts once and holds a
livesum gauge while it runs, with the real prometheus_client in multiprocess
mode (PROMETHEUS_MULTIPROC_DIR is set by `multiprom run`)."""

from prometheus_client import Counter, Gauge

REQUESTS = Counter("app_requests", "Requests served.")
IN_FLIGHT = Gauge("app_in_flight", "Requests in flight.", multiprocess_mode="livesum")
WORKERS = Gauge("app_worker_up", "One per live worker.", multiprocess_mode="liveall")
WORKERS.set(1)


def app(environ, start_response):
    with IN_FLIGHT.track_inprogress():
        REQUESTS.inc()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok\n"]
