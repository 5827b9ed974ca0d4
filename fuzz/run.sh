#!/usr/bin/env bash
# Runs the cargo-fuzz targets; what `just fuzz` and `just fuzz-ci` call.
#
#   fuzz/run.sh all SECONDS      every target for SECONDS each, over the
#                                committed corpus, which is left untouched
#                                (new inputs go to target/fuzz-ci): CI.
#   fuzz/run.sh TARGET SECONDS [LIBFUZZER-FLAGS...]
#                                one target, adding what it finds to its
#                                committed corpus (fuzz/corpus/TARGET); then
#                                minimize the corpus (docs/fuzzing.md).
#
# Installs what it needs: the nightly toolchain (if rustup lacks it) and
# cargo-fuzz (if `cargo fuzz` is missing; about a minute). Targets are built
# without AddressSanitizer (the code they reach has no unsafe blocks of
# ours, and ASan makes them several times slower) but with debug assertions
# and overflow checks. A finding fails the run; its input is saved under
# fuzz/artifacts/TARGET/ and printed in base64.
set -euo pipefail
cd "$(dirname "$0")"

if [ $# -lt 2 ]; then
    echo "usage: $0 all|TARGET SECONDS [LIBFUZZER-FLAGS...]" >&2
    exit 2
fi
what=$1
seconds=$2
shift 2

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "== installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

build_flags=(--release --debug-assertions --sanitizer none)

# Per-target libFuzzer flags.
target_flags() {
    case $1 in
        # An input beyond 24 operations is ignored: do not grow past them.
        parse_cache) echo "-max_len=1024" ;;
        http_request) echo "-dict=http_request.dict" ;;
    esac
}

run() {
    local target=$1
    shift
    # -timeout: one input may take this long (the HTTP target gives up on a
    # connection after 30 s); the outer timeout is the last resort.
    # shellcheck disable=SC2046 # target_flags is a list of words.
    timeout --kill-after=10 $((seconds + 300)) \
        cargo +nightly fuzz run "${build_flags[@]}" "$target" "$@" -- \
        -max_total_time="$seconds" -timeout=60 -print_final_stats=1 \
        $(target_flags "$target") "${extra_flags[@]}"
}

echo "== building the fuzz targets"
cargo +nightly fuzz build "${build_flags[@]}"

extra_flags=("$@")
if [ "$what" = all ]; then
    for target in $(cargo +nightly fuzz list); do
        echo "== fuzzing $target for ${seconds}s"
        scratch=target/fuzz-ci/corpus/$target
        rm -rf "$scratch"
        mkdir -p "$scratch" "corpus/$target"
        # New inputs go to the first directory; the committed one is read.
        run "$target" "$scratch" "corpus/$target"
    done
else
    mkdir -p "corpus/$what"
    run "$what" "corpus/$what"
fi
