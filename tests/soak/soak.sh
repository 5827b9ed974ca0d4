#!/usr/bin/env bash
# Soak test: `multiprom serve` for a while (default 10 minutes) under steady
# scraping and worker churn, checking that its memory (RSS) and open file
# descriptors stay flat. Used by `just soak`; results are in docs/soak.md.
#
# usage: tests/soak/soak.sh [SECONDS]
#
# Workers are real prometheus_client processes (tests/python/fault_writer.py,
# whose files keep growing); every 2 s one is killed with SIGKILL and
# replaced, and a killed worker's files are deleted 20 s later (as a
# compaction or a cleanup would), so the directory stays about the same size
# and anything that grows is the server's own. /metrics is scraped ten times
# a second, with a burst of 20 concurrent scrapes every 10 s (more than the
# endpoint collects at once: some get 503, which is not a failure).
#
# Environment: MULTIPROM_BIN (default: target/release/multiprom, built
# here), SOAK_PYTHON (default: a venv under target/ with prometheus_client),
# SOAK_WORKERS (default 6; each makes about 100 updates a second).
#
# Flat means (tests/soak/judge.py): after a one-minute warm-up, the median
# RSS of the last minute is within 10% + 4 MiB of the median of the second
# minute, the fewest open descriptors in the last minute are at most 2 more
# than the fewest in the second minute (a sample may fall in a burst of
# scrapes, so the floor is compared: a leak raises it), and no scrape
# failed (503 for too many concurrent scrapes is not a failure). Exit status 0 if flat, 1 if not; the samples are left in the
# run's directory (printed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."

duration=${1:-600}
workers=${SOAK_WORKERS:-6}
prom_client=0.26.0

if [[ -z "${MULTIPROM_BIN:-}" ]]; then
    cargo build --release --quiet -p multiprom
    MULTIPROM_BIN=target/release/multiprom
fi
if [[ -z "${SOAK_PYTHON:-}" ]]; then
    venv=target/py-venv-soak
    if [[ ! -x $venv/bin/python ]]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "prometheus_client==$prom_client"
    fi
    SOAK_PYTHON=$venv/bin/python
fi

run=$(mktemp -d -t multiprom-soak.XXXXXX)
dir=$run/metrics
mkdir "$dir"
samples=$run/samples.csv
echo "seconds,rss_kib,fds,files,scrapes_ok,scrapes_busy,scrapes_failed" > "$samples"

pids=()
cleanup() {
    for pid in "${pids[@]}" ${server:-}; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

"$MULTIPROM_BIN" serve --dir "$dir" --listen 127.0.0.1:0 2> "$run/serve.log" &
server=$!
for _ in $(seq 100); do
    grep -q '/metrics' "$run/serve.log" 2>/dev/null && break
    sleep 0.1
done
url=$(grep -o 'http://[^ ]*/metrics' "$run/serve.log" | head -1)
[[ -n $url ]] || { echo "soak: serve did not start:"; cat "$run/serve.log"; exit 1; }

start_worker() {
    PROMETHEUS_MULTIPROC_DIR=$dir "$SOAK_PYTHON" tests/python/fault_writer.py 0.01 > /dev/null 2>&1 &
    echo $!
}
for _ in $(seq "$workers"); do pids+=("$(start_worker)"); done

# One line per scrape: the HTTP status, or 000 if there was no answer.
scrape() {
    curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 "$url" || true
}
: > "$run/scrapes.log"
scraper() {
    while true; do
        scrape
        sleep 0.1
    done
}
# Appending (>>) from both writers, so that no line overwrites another.
scraper >> "$run/scrapes.log" 2>/dev/null &
pids+=($!)
burst() {
    while true; do
        sleep 10
        for _ in $(seq 20); do scrape & done
        wait
    done
}
burst >> "$run/scrapes.log" 2>/dev/null &
pids+=($!)

declare -A doomed=()
began=$SECONDS
next_sample=0
while (( SECONDS - began < duration )); do
    sleep 2
    now=$(( SECONDS - began ))
    # Churn: kill one worker, start another, forget files killed 20 s ago.
    victim_index=$(( RANDOM % workers ))
    victim=${pids[$victim_index]}
    kill -9 "$victim" 2>/dev/null || true
    wait "$victim" 2>/dev/null || true
    doomed[$victim]=$now
    pids[victim_index]=$(start_worker)
    for pid in "${!doomed[@]}"; do
        if (( now - doomed[$pid] >= 20 )); then
            rm -f "$dir"/*_"$pid".db
            unset "doomed[$pid]"
        fi
    done
    if ! kill -0 "$server" 2>/dev/null; then
        echo "soak: serve exited:"; cat "$run/serve.log"; exit 1
    fi
    if (( now >= next_sample )); then
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")
        fds=$(ls "/proc/$server/fd" | wc -l)
        files=$(find "$dir" -name '*.db' | wc -l)
        ok=$(grep -c '^200$' "$run/scrapes.log" || true)
        busy=$(grep -c '^503$' "$run/scrapes.log" || true)
        failed=$(grep -vc -e '^200$' -e '^503$' "$run/scrapes.log" || true)
        echo "$now,$rss,$fds,$files,$ok,$busy,$failed" >> "$samples"
        next_sample=$(( now + 10 ))
    fi
done

status=0
python3 tests/soak/judge.py "$samples" "$duration" || status=$?
echo "soak: samples in $samples"
exit $status
