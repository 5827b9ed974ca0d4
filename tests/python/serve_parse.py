"""Parses a whole exposition with prometheus_client's own parsers and prints
[name, type, [[sample name, labels, value], ...]] per family as JSON; fails
(exit 1, traceback) if the text does not parse.
Usage: serve_parse.py FILE text|openmetrics
"""

import json
import math
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text


def number(v):
    return v if math.isfinite(v) else repr(v)


def main():
    path, fmt = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    parse = parse_text if fmt == "text" else parse_openmetrics
    out = [
        [family.name, family.type,
         [[s.name, s.labels, number(s.value)] for s in family.samples]]
        for family in parse(text)
    ]
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
