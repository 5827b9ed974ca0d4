"""Comparing two sets of series, for the checkers that look at what a real
Prometheus server or node_exporter made of multiprom's output."""

import math


def same(a, b):
    """Equal values, NaN equal to NaN."""
    return a == b or (math.isnan(a) and math.isnan(b))


def differences(got, want, got_name, want_name):
    """Lines naming each series (key -> value) missing from one side or
    with another value; empty when the two agree."""
    lines = []
    for key in sorted(set(got) | set(want), key=repr):
        if key not in got:
            lines.append(f"missing in {got_name}: {key} = {want[key]}")
        elif key not in want:
            lines.append(f"only in {got_name}: {key} = {got[key]}")
        elif not same(got[key], want[key]):
            lines.append(f"{key}: {got_name} {got[key]}, {want_name} {want[key]}")
    return lines
