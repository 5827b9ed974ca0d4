"""prometheus_flask_exporter's documented gunicorn app, unchanged: the app
knows nothing of multiprom (tests/integration/python_package.rs)."""

from flask import Flask
from prometheus_flask_exporter.multiprocess import GunicornPrometheusMetrics

app = Flask(__name__)
metrics = GunicornPrometheusMetrics(app)


@app.route("/")
def index():
    return "ok\n"
