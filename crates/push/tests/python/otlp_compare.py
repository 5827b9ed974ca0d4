"""Decodes multiprom's OTLP bodies and the OpenTelemetry Python SDK's for
the same recordings and compares them point by point; exits non-zero
saying every difference.

    otlp_compare.py DIR

DIR holds {multiprom,sdk}-{cumulative,delta}-{1,2}.pb: the bodies after
phase A (1) and after phase B (2).

Compared: metric names, types, temporality, monotonicity, descriptions,
point attributes, values, explicit bounds and bucket counts, counts, sums, exponential histograms
scales, zero counts, offsets and bucket counts,
and (where the SDK has them) exemplars' trace and span ids and values; the
resource's service.name; and that a delta point starts where the previous
interval ended. Not compared, by design (see the test): the scope (the
SDK's meter vs multiprom), min and max (not in Prometheus histograms),
start times' absolute values (the SDK's provider start vs the directory's),
gauges' start time (the SDK leaves it unset), metric metadata.
"""

import math
import os
import sys

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

failures = []


def check(what, got, want):
    if isinstance(want, float) and isinstance(got, float):
        same = math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
    else:
        same = got == want
    if not same:
        failures.append(f"{what}: multiprom {got!r}, SDK {want!r}")


def load(path):
    request = metrics_service_pb2.ExportMetricsServiceRequest()
    with open(path, "rb") as f:
        request.ParseFromString(f.read())
    return request


def attrs(kvs):
    return tuple(sorted((kv.key, kv.value.string_value) for kv in kvs))


def exemplars(point):
    return sorted(
        (e.trace_id.hex(), e.span_id.hex(), e.as_double) for e in point.exemplars
    )


def buckets(b):
    """Dense buckets as (offset of the first non-empty one, counts to the
    last non-empty one): the SDK sends its backing array's empty ends."""
    counts = list(b.bucket_counts)
    if not any(counts):
        return (0, [])
    first = next(i for i, c in enumerate(counts) if c)
    last = max(i for i, c in enumerate(counts) if c)
    return (b.offset + first, counts[first : last + 1])


def metrics(request):
    out = {}
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out[metric.name] = metric
    return out


def service_name(request):
    for kv in request.resource_metrics[0].resource.attributes:
        if kv.key == "service.name":
            return kv.value.string_value
    return None


def compare(name, ours, sdk, previous):
    check(f"{name}: service.name", service_name(ours), service_name(sdk))
    ours_m, sdk_m = metrics(ours), metrics(sdk)
    check(f"{name}: metric names", sorted(ours_m), sorted(sdk_m))
    for metric_name in sorted(set(ours_m) & set(sdk_m)):
        o, s = ours_m[metric_name], sdk_m[metric_name]
        at = f"{name}: {metric_name}"
        check(f"{at}: type", o.WhichOneof("data"), s.WhichOneof("data"))
        check(f"{at}: description", o.description, s.description)
        kind = s.WhichOneof("data")
        if o.WhichOneof("data") != kind:
            continue
        od, sd = getattr(o, kind), getattr(s, kind)
        if kind in ("sum", "histogram", "exponential_histogram"):
            check(f"{at}: temporality", od.aggregation_temporality, sd.aggregation_temporality)
        if kind == "sum":
            check(f"{at}: monotonic", od.is_monotonic, sd.is_monotonic)
        op = {attrs(p.attributes): p for p in od.data_points}
        sp = {attrs(p.attributes): p for p in sd.data_points}
        check(f"{at}: series", sorted(op), sorted(sp))
        for key in sorted(set(op) & set(sp)):
            p, q = op[key], sp[key]
            pat = f"{at}{dict(key)}"
            if kind in ("sum", "gauge"):
                check(f"{pat}: value", p.as_double, q.as_double)
            if kind == "histogram":
                check(f"{pat}: bounds", list(p.explicit_bounds), list(q.explicit_bounds))
                check(f"{pat}: bucket counts", list(p.bucket_counts), list(q.bucket_counts))
                check(f"{pat}: count", p.count, q.count)
                check(f"{pat}: sum", p.sum, q.sum)
            if kind == "exponential_histogram":
                check(f"{pat}: scale", p.scale, q.scale)
                check(f"{pat}: zero count", p.zero_count, q.zero_count)
                check(f"{pat}: count", p.count, q.count)
                check(f"{pat}: sum", p.sum, q.sum)
                for side in ("positive", "negative"):
                    ours_b, sdk_b = buckets(getattr(p, side)), buckets(getattr(q, side))
                    check(f"{pat}: {side} offset", ours_b[0], sdk_b[0])
                    check(f"{pat}: {side} bucket counts", ours_b[1], sdk_b[1])
            if kind in ("sum", "histogram", "exponential_histogram"):
                if q.exemplars:
                    check(f"{pat}: exemplars", exemplars(p), exemplars(q))
                if previous is not None and sd.aggregation_temporality == 1:
                    # Delta: this interval starts where the last one ended.
                    last = metrics(previous)[metric_name]
                    last_time = getattr(last, kind).data_points[0].time_unix_nano
                    check(f"{pat}: start is the last request's time", p.start_time_unix_nano, last_time)
                check(f"{pat}: a start before the time", p.start_time_unix_nano <= p.time_unix_nano, True)


def main():
    directory = sys.argv[1]
    compared = 0
    for temporality in ("cumulative", "delta"):
        previous = None
        for i in (1, 2):
            name = f"{temporality}-{i}"
            ours = load(os.path.join(directory, f"multiprom-{name}.pb"))
            sdk = load(os.path.join(directory, f"sdk-{name}.pb"))
            compare(name, ours, sdk, previous)
            previous = ours
            compared += 1
    # The exemplars compared must be there: a run without them checks less.
    sdk_exemplars = sum(
        len(p.exemplars)
        for m in metrics(load(os.path.join(directory, "sdk-cumulative-1.pb"))).values()
        for p in getattr(m, m.WhichOneof("data")).data_points
        if m.WhichOneof("data") in ("sum", "histogram")
    )
    if sdk_exemplars != 2:
        failures.append(f"the SDK recorded {sdk_exemplars} exemplars, not the 2 recorded with a span")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"{compared} request pairs the same")


if __name__ == "__main__":
    main()
