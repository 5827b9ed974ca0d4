"""The same recordings through prometheus_client (multiprocess files) and
through the OpenTelemetry Python SDK (OTLP/HTTP bodies captured by a tiny
server in this process), for the OTLP comparison test.

    otlp_sdk.py prometheus A|B      records phase A or B into
                                    $PROMETHEUS_MULTIPROC_DIR, prints the pid
    otlp_sdk.py sdk OUT_DIR         records A, exports, records B, exports,
                                    cumulative and delta; writes
                                    OUT_DIR/sdk-{cumulative,delta}-{1,2}.pb
"""

import gzip
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"

# (queue, increment, with the exemplar's span) per phase.
JOBS = {
    "A": [("a", 2.0, False), ("a", 1.0, True), ("b", 2.0, False)],
    "B": [("a", 4.0, False), ("b", 1.0, False)],
}
TEMPERATURE = {"A": 21.5, "B": 19.0}
# (route, observation, with the exemplar's span) per phase.
LATENCY = {
    "A": [("/", 0.05, True), ("/", 0.5, False), ("/", 2.0, False), ("/api", 0.7, False)],
    "B": [("/", 0.2, False), ("/", 0.01, False), ("/api", 5.0, False), ("/api", 0.3, False)],
}
BOUNDS = (0.1, 1.0)
# Observations of the histogram multiprom also records natively (the test
# writes them to the native histogram file with schema RPC_SCALE): exact
# powers of two (bucket boundaries), a zero. No negatives: the SDK's
# histogram instrument refuses them.
RPC = {
    "A": [0.0, 0.3, 1.0, 1.5, 2.0, 3.0, 4.0, 100.0],
    "B": [0.3, 2.0, 2.5, 8.0, 0.0],
}
RPC_SCALE = 3


def prometheus(phase):
    from prometheus_client import Counter, Gauge, Histogram

    jobs = Counter("jobs", "Jobs done.", ["queue"])
    temperature = Gauge("temperature", "Temperature.", multiprocess_mode="mostrecent")
    latency = Histogram("latency_seconds", "Latency.", ["route"], buckets=BOUNDS)
    rpc = Histogram("rpc_seconds", "RPC time.")
    for value in RPC[phase]:
        rpc.observe(value)
    for queue, amount, _ in JOBS[phase]:
        jobs.labels(queue).inc(amount)
    temperature.set(TEMPERATURE[phase])
    for route, value, _ in LATENCY[phase]:
        latency.labels(route).observe(value)
    print(os.getpid())


class Capture(BaseHTTPRequestHandler):
    bodies = {}
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        with self.lock:
            self.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def sdk(out_dir):
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.metrics.view import (
        ExplicitBucketHistogramAggregation,
        ExponentialBucketHistogramAggregation,
        View,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    span = NonRecordingSpan(
        SpanContext(
            trace_id=int(TRACE_ID, 16),
            span_id=int(SPAN_ID, 16),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )
    traced = trace.set_span_in_context(span)

    providers = {}
    for name, temporality in (
        ("cumulative", AggregationTemporality.CUMULATIVE),
        ("delta", AggregationTemporality.DELTA),
    ):
        exporter = OTLPMetricExporter(
            endpoint=f"http://127.0.0.1:{port}/{name}/v1/metrics",
            timeout=10,
            preferred_temporality={Counter: temporality, Histogram: temporality},
        )
        # Exports only when flushed (the interval is never reached).
        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
        provider = MeterProvider(
            metric_readers=[reader],
            resource=Resource.create({"service.name": "otlp-test"}),
            views=[
                View(
                    instrument_name="latency_seconds",
                    aggregation=ExplicitBucketHistogramAggregation(boundaries=BOUNDS),
                ),
                # The native histogram's resolution as the most the SDK
                # uses (it starts at the most and lowers it as buckets
                # outgrow max_size, which these do not).
                View(
                    instrument_name="rpc_seconds",
                    aggregation=ExponentialBucketHistogramAggregation(
                        max_size=160, max_scale=RPC_SCALE
                    ),
                ),
            ],
        )
        meter = provider.get_meter("otlp-test")
        providers[name] = (
            provider,
            meter.create_counter("jobs", description="Jobs done."),
            meter.create_gauge("temperature", description="Temperature."),
            meter.create_histogram("latency_seconds", description="Latency."),
            meter.create_histogram("rpc_seconds", description="RPC time."),
        )

    for phase in ("A", "B"):
        for provider, jobs, temperature, latency, rpc in providers.values():
            for value in RPC[phase]:
                rpc.record(value)
            for queue, amount, with_span in JOBS[phase]:
                jobs.add(amount, {"queue": queue}, context=traced if with_span else None)
            temperature.set(TEMPERATURE[phase])
            for route, value, with_span in LATENCY[phase]:
                latency.record(value, {"route": route}, context=traced if with_span else None)
            if not provider.force_flush(timeout_millis=20_000):
                sys.exit(f"the SDK did not export phase {phase}")
    for name in providers:
        bodies = Capture.bodies.get(f"/{name}/v1/metrics", [])
        if len(bodies) < 2:
            sys.exit(f"{name}: {len(bodies)} exports captured, not 2")
        for i, body in enumerate(bodies[:2], 1):
            with open(os.path.join(out_dir, f"sdk-{name}-{i}.pb"), "wb") as f:
                f.write(body)
    for provider, *_ in providers.values():
        provider.shutdown(timeout_millis=5_000)
    server.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "prometheus":
        prometheus(sys.argv[2])
    else:
        sdk(sys.argv[2])
