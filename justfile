# Thin recipes that mirror CI (.ci/run). `just ci` is what CI runs.

default: ci

# Check formatting.
fmt:
    cargo fmt --all --check
    cargo fmt --all --check --manifest-path fuzz/Cargo.toml

# Lint everything, warnings are errors.
lint:
    cargo clippy --workspace --all-targets -- -D warnings

# All tests, including the Python interop tests (they provision a venv under target/).
test:
    cargo test --workspace

# Release artefacts from this checkout (docs/release.md), in `out`: wheels
# (manylinux_2_17 and musllinux_1_2, x86_64 and aarch64), the sdist, binary
# tarballs for the same four targets (with completions and man pages; the
# musl ones static) and SHA256SUMS. Cross builds link with zig from PyPI.
dist out="target/dist":
    bash dist/build.sh all {{out}}

# Checks every artefact of `just dist` where it would run (docs/release.md):
# in a Debian 11 root, in an arm64 Debian 12 root under qemu-user, the static
# binaries here and under qemu-aarch64, the sdist built in a fresh venv.
# Needs root. Run before every release.
dist-check out="target/dist":
    bash dist/check.sh {{out}}

# Benchmarks (criterion); see docs/benchmarks.md for recorded figures.
bench:
    cargo bench --workspace

# Scrapes side by side, in one run (docs/benchmarks.md, "Scrapes"): Python's
# generate_latest, `multiprom scrape` and a warm `multiprom serve` GET, with
# peak RSS, on directories of 400, 4,000 and 16,000 files written by real
# prometheus_client workers, and the vLLM-like `realistic` set. Directories
# are made once under `base` (tmpfs) and kept. `compare`: a second multiprom
# binary (the build before a change) measured in turn on the same files.
bench-scrape base="/dev/shm/multiprom-bench" workers="100,1000,4000" repeat="7" compare="":
    cargo build --release -p multiprom
    python3 -m venv target/py-venv-bench
    target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check prometheus_client==0.26.0
    mkdir -p {{base}}
    [ -d {{base}}/realistic ] || MULTIPROM_BENCH_DIR={{base}} cargo bench -p multiprom-collector --bench scrape -- --list > /dev/null
    target/py-venv-bench/bin/python tests/python/bench_scrape.py --multiprom target/release/multiprom --base {{base}} --workers {{workers}} --dir {{base}}/realistic --repeat {{repeat}} {{ if compare != "" { "--compare " + compare } else { "" } }}

# docs/benchmarks.md, "Polling": `multiprom serve` polled as LLM routers
# poll it, in one run, on three directories of about 4,000 files written by
# real prometheus_client processes (`bench`: a counter, gauges and a
# histogram per worker; `vllm`: a vLLM API server's families; `exemplars`:
# `bench` with exemplars, written by multiprom's Python writer, built from
# this checkout), while 8 of them keep writing: 4 clients at 20 Hz, each
# poll in text, OpenMetrics, protobuf and gzip, unfiltered and with name[];
# serve's processor time, latency and failures, Python's generate_latest
# beside them. `compare`: a second multiprom binary (the build before a
# change) polled in turn with this one on the same directories. The HTTP
# side's floor: the fixed_answer example answering each scenario's own bytes
# with no collection. Directories are made afresh under `base` (tmpfs) and
# removed after; every process started is stopped, also on Ctrl-C.
bench-poll base="/dev/shm/multiprom-bench" compare="":
    cargo build --release -p multiprom
    cargo build --release -p multiprom-http --example fixed_answer
    python3 -m venv target/py-venv-bench
    target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check prometheus_client==0.26.0 maturin==1.16.0
    PATH="$PWD/target/py-venv-bench/bin:$PATH" VIRTUAL_ENV="$PWD/target/py-venv-bench" CARGO_TARGET_DIR="$PWD/target/python-wheel" target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./crates/python
    target/py-venv-bench/bin/python tests/python/bench_poll.py --multiprom target/release/multiprom --floor target/release/examples/fixed_answer --base {{base}} {{ if compare != "" { "--compare " + compare } else { "" } }}

# The Python package's in-process scrape benchmark (docs/benchmarks.md,
# "Python package"): prometheus_client, prometheus_client_python_speedups and
# multiprom (built from this checkout) in one venv, on one directory of 4,000
# files made on the first run.
bench-python dir="target/python-bench":
    python3 -m venv target/py-venv-bench
    target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check prometheus_client==0.26.0 prometheus_client_python_speedups==0.1.0 maturin==1.16.0
    PATH="$PWD/target/py-venv-bench/bin:$PATH" VIRTUAL_ENV="$PWD/target/py-venv-bench" CARGO_TARGET_DIR="$PWD/target/python-wheel" target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./crates/python
    target/py-venv-bench/bin/python tests/python/bench_python_package.py {{dir}}

# The Python writer (docs/benchmarks.md, "Python writer"): Counter.inc(),
# Gauge.set() and Histogram.observe() through prometheus_client's API with
# its own multiprocess value class and with multiprom's (built from this
# checkout), on 1 and 8 threads, in one run; files under `dir` (tmpfs).
bench-writer dir="/dev/shm/multiprom-bench-writer":
    python3 -m venv target/py-venv-bench
    target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check prometheus_client==0.26.0 maturin==1.16.0
    PATH="$PWD/target/py-venv-bench/bin:$PATH" VIRTUAL_ENV="$PWD/target/py-venv-bench" CARGO_TARGET_DIR="$PWD/target/python-wheel" target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./crates/python
    target/py-venv-bench/bin/python tests/python/bench_writer.py {{dir}}
    rm -rf {{dir}}

# What native histograms add to prometheus_client's Histogram.observe():
# the opt-in (install(native_histograms=True)) off and on, with
# prometheus_client's own value class and with multiprom's writer, and
# multiprom.NativeHistogram, in one run; files under `dir` (tmpfs).
bench-native-python dir="/dev/shm/multiprom-bench-native":
    python3 -m venv target/py-venv-bench
    target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check prometheus_client==0.26.0 maturin==1.16.0
    PATH="$PWD/target/py-venv-bench/bin:$PATH" VIRTUAL_ENV="$PWD/target/py-venv-bench" CARGO_TARGET_DIR="$PWD/target/python-wheel" target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./crates/python
    target/py-venv-bench/bin/python tests/python/bench_native_observe.py {{dir}}
    rm -rf {{dir}}

# Compaction under worker churn (docs/benchmarks.md, last section): 100,000
# simulated worker lifetimes through one directory, `batch` workers between
# two scrapes, with and without compaction.
bench-compaction lifetimes="100000" batch="1000" dir="target/compaction-bench":
    python3 -m venv target/py-venv-bench
    target/py-venv-bench/bin/pip install --quiet --disable-pip-version-check prometheus_client==0.26.0
    cargo run --release -p multiprom-maintain --example compaction_churn -- {{dir}} target/py-venv-bench/bin/python {{lifetimes}} {{batch}}

# Targets: read_file, decode_key, parse_cache, http_request; libFuzzer flags
# may follow the seconds; cargo-fuzz is installed if missing (docs/fuzzing.md).
# Fuzz one target for a while, adding what it finds to fuzz/corpus/TARGET.
fuzz target="parse_cache" seconds="600" *flags:
    bash fuzz/run.sh {{target}} {{seconds}} {{flags}}

# Every fuzz target for a bounded time over the committed corpus, as CI does.
fuzz-ci seconds="45":
    bash fuzz/run.sh all {{seconds}}

# Not in CI; see docs/soak.md for what it does and the recorded result.
# Soak: serve for 10 minutes under scraping and worker churn; RSS and fds must stay flat.
soak seconds="600":
    nice bash tests/soak/soak.sh {{seconds}}

# What CI runs.
ci:
    bash .ci/run
