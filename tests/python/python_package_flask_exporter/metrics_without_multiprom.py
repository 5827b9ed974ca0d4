"""The control: prometheus_flask_exporter's metrics server, as its gunicorn
configuration starts it, in a process without multiprom; prints the body of
a GET to it (or exits non-zero).

usage: metrics_without_multiprom.py PORT"""

import sys
import urllib.request

from prometheus_flask_exporter.multiprocess import GunicornPrometheusMetrics

import prometheus_client.multiprocess

if "multiprom" in sys.modules or prometheus_client.multiprocess.MultiProcessCollector.__module__ != "prometheus_client.multiprocess":
    sys.exit("the control must run without multiprom")
port = int(sys.argv[1])
GunicornPrometheusMetrics.start_http_server_when_ready(port, host="127.0.0.1")
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
    sys.stdout.buffer.write(response.read())
