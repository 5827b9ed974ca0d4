"""Judges a soak run's samples (see tests/soak/soak.sh): prints a summary
and exits 0 if RSS and open descriptors stayed flat and no scrape failed
(503, the endpoint's answer to too many concurrent scrapes, is not a
failure; any other status or no answer is).

usage: judge.py SAMPLES.csv DURATION_SECONDS
"""

import csv
import statistics
import sys

rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(open(sys.argv[1]))]
duration = int(sys.argv[2])
second_minute = [r for r in rows if 60 <= r["seconds"] < 120]
last_minute = [r for r in rows if r["seconds"] >= duration - 60]
if not second_minute or not last_minute or duration < 180:
    sys.exit("soak: too short to judge (needs at least 3 minutes)")

rss_before = statistics.median(r["rss_kib"] for r in second_minute)
rss_after = statistics.median(r["rss_kib"] for r in last_minute)
fd_floor_before = min(r["fds"] for r in second_minute)
fd_floor_after = min(r["fds"] for r in last_minute)
end = rows[-1]
# 503 is the endpoint's answer to more concurrent scrapes than it collects
# at once (the bursts ask for 20): overload handled, not a failure.
print(f"soak: {duration} s, {end['scrapes_ok']} scrapes answered 200, "
      f"{end.get('scrapes_busy', 0)} answered 503 (too many at once), "
      f"{end['scrapes_failed']} failed (any other status, or no answer)")
print(f"soak: RSS median {rss_before:.0f} KiB in minute 2, {rss_after:.0f} KiB in the last minute "
      f"(max {max(r['rss_kib'] for r in rows)} KiB)")
print(f"soak: open fds at least {fd_floor_before} in minute 2, at least {fd_floor_after} in the "
      f"last minute (max {max(r['fds'] for r in rows)}, in a burst of scrapes)")
print(f"soak: *.db files {min(r['files'] for r in rows)}..{max(r['files'] for r in rows)}")
flat = (rss_after <= rss_before * 1.10 + 4096
        and fd_floor_after <= fd_floor_before + 2
        and end["scrapes_failed"] == 0)
print("soak: FLAT" if flat else "soak: NOT FLAT")
sys.exit(0 if flat else 1)
