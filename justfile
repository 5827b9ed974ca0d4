# Thin recipes that mirror CI (.ci/run). `just ci` is what CI runs.

default: ci

# Check formatting.
fmt:
    cargo fmt --all --check

# Lint everything, warnings are errors.
lint:
    cargo clippy --workspace --all-targets -- -D warnings

# All tests, including the Python interop tests (they provision a venv under target/).
test:
    cargo test --workspace

# Benchmarks (criterion); see docs/benchmarks.md for recorded figures.
bench:
    cargo bench --workspace

# Fuzz the reader for a while (needs nightly and cargo-fuzz).
fuzz target="read_file" seconds="60":
    cd fuzz && cargo +nightly fuzz run {{target}} -- -max_total_time={{seconds}}

# What CI runs.
ci:
    bash .ci/run
