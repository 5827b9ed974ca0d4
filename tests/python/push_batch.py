"""A batch job for the push tests: counts ITEMS items in one process with
plain prometheus_client (multiprocess mode, the directory from
PROMETHEUS_MULTIPROC_DIR), and exits at once, long before any push
interval ends.

usage: push_batch.py ITEMS
"""

import sys

from prometheus_client import Counter

ITEMS = Counter("batch_items", "Items processed.", ["stage"])

n = int(sys.argv[1])
ITEMS.labels("read").inc(n)
ITEMS.labels("written").inc(n - 1)
