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

# Benchmarks (criterion); see docs/benchmarks.md for recorded figures.
bench:
    cargo bench --workspace

# Targets: read_file, decode_key, parse_cache, http_request; libFuzzer flags
# may follow the seconds; cargo-fuzz is installed if missing (docs/fuzzing.md).
# Fuzz one target for a while, adding what it finds to fuzz/corpus/TARGET.
fuzz target="parse_cache" seconds="600" *flags:
    bash fuzz/run.sh {{target}} {{seconds}} {{flags}}

# Every fuzz target for a bounded time over the committed corpus, as CI does.
fuzz-ci seconds="45":
    bash fuzz/run.sh all {{seconds}}

# What CI runs.
ci:
    bash .ci/run
