"""prometheus_flask_exporter's documented gunicorn configuration: its
metrics server runs in the master. Importing
prometheus_flask_exporter.multiprocess binds prometheus_client's
MultiProcessCollector; with MULTIPROM_LATE_INSTALL=1, multiprom.install()
runs only after that, so the metrics server keeps prometheus_client's class
while the module holds multiprom's."""

import os

from prometheus_flask_exporter.multiprocess import GunicornPrometheusMetrics

if os.environ.get("MULTIPROM_LATE_INSTALL") == "1":
    import multiprom

    multiprom.install()


def when_ready(server):
    GunicornPrometheusMetrics.start_http_server_when_ready(
        int(os.environ["METRICS_PORT"]), host="127.0.0.1")


def child_exit(server, worker):
    GunicornPrometheusMetrics.mark_process_dead_on_child_exit(worker.pid)
