#!/usr/bin/env bash
# Checks the release artefacts of `just dist` where they would run
# (docs/release.md, "Where they are checked"):
#
#   glibc x86_64   wheel and tarball in a Debian 11 root (glibc 2.31,
#                  CPython 3.9), made with debootstrap
#   glibc aarch64  wheel and tarball in an arm64 Debian 12 root, run under
#                  qemu-user
#   musl           the static binaries on this machine and under
#                  qemu-aarch64; the musl wheels' tags and the libraries
#                  their extension needs (no musl CPython to run them here)
#   sdist          built and installed in a fresh venv here (needs cargo)
#   pages-64k      the format crate's tests on aarch64 with 64 KiB pages
#
# In each place dist/check_artefact.py checks `--version`, a `scrape`
# byte-identical to prometheus_client's, `run --` of an app that forks
# workers and, for the Python package, MULTIPROM_INSTALL=collector,writer.
#
# Usage: dist/check.sh [OUT_DIR] [PART...]   (default: target/dist, every
# part; parts: glibc-x86_64 glibc-aarch64 musl pages-64k sdist, and
# wheel-x86_64: the x86_64 wheel alone, as CI checks it)
#
# Needs root (debootstrap, chroot, binfmt_misc); installs debootstrap and
# qemu-user-static with apt-get when missing. The Debian roots are made
# once, under target/dist-check/, from the Debian archive apt uses here.
set -euo pipefail
cd "$(dirname "$0")/.."

dist=$(cd "${1:-target/dist}" && pwd)
shift || true
parts=${*:-glibc-x86_64 glibc-aarch64 musl pages-64k sdist}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
work=$PWD/target/dist-check
mkdir -p "$work"
# The prometheus_client every check writes and merges with.
prometheus_client=prometheus_client==0.26.0
# A limit for any one step, so a check that goes wrong fails rather than
# hangs (qemu-user makes the aarch64 ones slow).
step_limit=1200

if [ "$(id -u)" != 0 ]; then
    echo "dist/check.sh needs root (debootstrap, chroot, binfmt_misc)" >&2
    exit 2
fi

timings=()
timed() {
    local label=$1 start=$SECONDS
    shift
    "$@"
    timings+=("$((SECONDS - start)) s  $label")
}

artefact() {
    local found
    found=$(ls "$dist"/$1 2> /dev/null | head -n 1)
    [ -n "$found" ] || { echo "no $1 in $dist (run just dist first)" >&2; exit 1; }
    echo "$found"
}

tools() {
    local missing=()
    command -v debootstrap > /dev/null || missing+=(debootstrap)
    command -v readelf > /dev/null || missing+=(binutils)
    # qemu-user only for the parts that run aarch64 programs.
    local aarch64=""
    case " $parts " in
        *" glibc-aarch64 "* | *" musl "* | *" pages-64k "*) aarch64=yes ;;
    esac
    if [ -n "$aarch64" ]; then
        command -v qemu-aarch64-static > /dev/null || missing+=(qemu-user-static binfmt-support)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
    fi
    if [ -n "$aarch64" ]; then
        # aarch64 programs (the arm64 root, the static binary, the tests)
        # run through binfmt_misc and qemu-user.
        [ -e /proc/sys/fs/binfmt_misc/register ] \
            || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
        update-binfmts --enable qemu-aarch64 2> /dev/null || true
        [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] \
            || { echo "qemu-aarch64 is not registered with binfmt_misc" >&2; exit 1; }
    fi
    # prometheus_client, downloaded once here and installed from this
    # folder in the roots (which have no CA certificates of this machine).
    if ! ls "$work"/wheelhouse/prometheus_client-*.whl > /dev/null 2>&1; then
        python3 -m pip download --quiet --no-deps --only-binary :all: -d "$work/wheelhouse" "$prometheus_client"
    fi
}

# A Debian root for `suite` on `arch` under target/dist-check, made once.
debian_root() {
    local suite=$1 arch=$2 root="$work/$1-$2"
    if [ ! -e "$root/.complete" ]; then
        local mirror tmp="$work/.$suite-$arch.tmp"
        mirror=$(sh dist/debian-mirror.sh)
        rm -rf "$tmp"
        local include=--include=python3,python3-venv,ca-certificates
        if [ "$arch" = "$(dpkg --print-architecture)" ]; then
            debootstrap --variant=minbase "$include" "$suite" "$tmp" "$mirror" > "$work/debootstrap-$suite-$arch.log"
        else
            debootstrap --variant=minbase --arch="$arch" --foreign "$include" "$suite" "$tmp" "$mirror" > "$work/debootstrap-$suite-$arch.log"
            in_root "$tmp" /debootstrap/debootstrap --second-stage >> "$work/debootstrap-$suite-$arch.log"
        fi
        touch "$tmp/.complete"
        rm -rf "$root"
        mv "$tmp" "$root"
    fi
    echo "$root"
}

# Runs a command in `root`, with /proc and /dev, in a mount namespace of its
# own (the mounts go when it ends, however it ends).
in_root() {
    local root=$1
    shift
    timeout "$step_limit" unshare --mount --propagation private sh -c '
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        exec chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
    ' sh "$root" "$@"
}

# Fails unless the ELF file `file` loads on glibc 2.17: no symbol of a newer
# glibc version, and no unversioned symbol to be found in the C library at
# load time (a function glibc gained later, declared by hand, links against
# zig's stubs but fails to load on an older glibc). The extension's
# unversioned symbols are the Python C API's, which the interpreter has.
glibc_2_17() {
    local file=$1 what=$2 newest unversioned
    newest=$(readelf --dyn-syms -W "$file" | sed -n 's/.*@GLIBC_\([0-9][0-9.]*\).*/\1/p' | sort -V | tail -n 1)
    if [ "$(printf '%s\n2.17\n' "$newest" | sort -V | tail -n 1)" != 2.17 ]; then
        echo "$what needs glibc $newest" >&2
        exit 1
    fi
    unversioned=$(readelf --dyn-syms -W "$file" \
        | awk '$7 == "UND" && $5 == "GLOBAL" && $8 != "" && $8 !~ /@/ && $8 !~ /^_?Py/ { print $8 }' \
        | tr '\n' ' ')
    if [ -n "$unversioned" ]; then
        echo "$what needs symbols glibc 2.17 may lack: $unversioned" >&2
        exit 1
    fi
    echo "ok   $what: glibc $newest symbols at most, nothing unversioned from the C library"
}

# The wheel (and with `tarball` the tarball) of a glibc target, in `root`.
check_glibc() {
    local target=$1 root=$2 tarball=${3:-}
    local arch=${target%%-*} wheel
    wheel=$(artefact "multiprom-$version-cp39-abi3-*manylinux_2_17_$arch.whl")
    rm -rf "$root/check"
    mkdir -p "$root/check"
    cp "$wheel" "$work"/wheelhouse/*.whl dist/check_artefact.py "$root/check/"
    echo "== $target in Debian $(cat "$root/etc/debian_version") (glibc $(in_root "$root" ldd --version | head -n 1 | sed 's/.* //'), $(in_root "$root" python3 --version), $(in_root "$root" uname -m))"
    echo "-- the wheel: $(basename "$wheel")"
    python3 -m zipfile -e "$wheel" "$root/check/unpacked"
    glibc_2_17 "$root"/check/unpacked/multiprom/_native*.so "its extension"
    in_root "$root" sh -ec "
        python3 -m venv /check/venv-wheel
        /check/venv-wheel/bin/pip install --quiet --no-index --find-links /check /check/$(basename "$wheel")
        /check/venv-wheel/bin/python /check/check_artefact.py /check/venv-wheel/bin/multiprom $version --python-package --port 19481"
    [ -n "$tarball" ] || return 0
    tarball=$(artefact "multiprom-$version-$target.tar.gz")
    tar -xzf "$tarball" -C "$root/check"
    echo "-- the tarball's binary: $(basename "$tarball")"
    glibc_2_17 "$root/check/multiprom-$version-$target/multiprom" "the binary"
    in_root "$root" sh -ec "
        python3 -m venv /check/venv-plain
        /check/venv-plain/bin/pip install --quiet --no-index --find-links /check prometheus_client
        /check/venv-plain/bin/python /check/check_artefact.py /check/multiprom-$version-$target/multiprom $version --port 19482"
}

# check_glibc in a Debian `suite` root for `arch`.
in_debian() {
    local root
    root=$(debian_root "$1" "$2")
    [ -d "$root/etc" ] || { echo "no Debian root at '$root'" >&2; exit 1; }
    check_glibc "$3" "$root" "${4:-}"
}

# A venv here with prometheus_client, for the checks run on this machine.
host_venv() {
    local venv="$work/venv-host"
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --no-index --find-links "$work/wheelhouse" prometheus_client
    fi
    echo "$venv"
}

musl() {
    local venv
    venv=$(host_venv)
    for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
        local tarball stage="$work/$target"
        tarball=$(artefact "multiprom-$version-$target.tar.gz")
        rm -rf "$stage"
        mkdir -p "$stage"
        tar -xzf "$tarball" -C "$stage"
        local binary="$stage/multiprom-$version-$target/multiprom"
        if readelf -d "$binary" | grep -q '(NEEDED)'; then
            echo "$binary: not static:" >&2
            readelf -d "$binary" | grep '(NEEDED)' >&2
            exit 1
        fi
        echo "== $target, static ($(readelf -h "$binary" | sed -n 's/.*Machine: *//p'), no NEEDED library), on this machine$([ "${target%%-*}" = "$(uname -m)" ] || echo ' through qemu-user')"
        timeout "$step_limit" "$venv/bin/python" dist/check_artefact.py "$binary" "$version" --port 19483
    done
    for arch in x86_64 aarch64; do
        local wheel unpacked="$work/musl-wheel-$arch"
        wheel=$(artefact "multiprom-$version-cp39-abi3-musllinux_1_2_$arch.whl")
        rm -rf "$unpacked"
        python3 -m zipfile -e "$wheel" "$unpacked"
        grep -qx "Tag: cp39-abi3-musllinux_1_2_$arch" "$unpacked"/multiprom-*.dist-info/WHEEL \
            || { echo "$wheel: not tagged musllinux_1_2_$arch" >&2; exit 1; }
        # musl's dynamic linker is its libc: `libc.so` is the one library a
        # musl extension may need.
        local needed
        needed=$(readelf -d "$unpacked"/multiprom/_native*.so | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
        if [ "$needed" != "libc.so " ]; then
            echo "$wheel: the extension needs $needed" >&2
            exit 1
        fi
        echo "== $(basename "$wheel"): tag musllinux_1_2_$arch, the extension needs only $needed(not run: no musl CPython here)"
    done
}

# The format crate's tests (the writer, the read maps, the SIGBUS guard),
# built for aarch64 and run under qemu-user with 64 KiB pages, the size
# recommended on NVIDIA Grace hosts; the run fails unless they saw it.
# One test thread: with several, qemu-user 7.2's emulated 64 KiB pages
# (over the host's 4 KiB) make musl's malloc fail now and then in any of
# the tests ("memory allocation of 33 bytes failed"), which 4 KiB pages
# under the same qemu never do.
pages_64k() {
    local tools
    tools=$(bash dist/build.sh tools | tail -n 1)
    echo "== the format crate's tests on aarch64 with 64 KiB pages (qemu-user)"
    PATH="$tools:$PATH" QEMU_PAGESIZE=65536 MULTIPROM_EXPECT_PAGE_SIZE=65536 \
        timeout "$step_limit" cargo-zigbuild test --locked -p multiprom-format --lib \
        --target aarch64-unknown-linux-musl --target-dir target/dist-build -- --test-threads=1
}

sdist() {
    local sdist venv="$work/venv-sdist"
    sdist=$(artefact "multiprom-$version.tar.gz")
    rm -rf "$venv"
    python3 -m venv "$venv"
    echo "== $(basename "$sdist"): pip install in a fresh venv (builds with cargo)"
    timeout "$step_limit" "$venv/bin/pip" install --quiet "$sdist"
    timeout "$step_limit" "$venv/bin/python" dist/check_artefact.py "$venv/bin/multiprom" "$version" --python-package --port 19484
}

tools
for part in $parts; do
    case "$part" in
        glibc-x86_64) timed "$part" in_debian bullseye amd64 x86_64-unknown-linux-gnu tarball ;;
        wheel-x86_64) timed "$part" in_debian bullseye amd64 x86_64-unknown-linux-gnu ;;
        glibc-aarch64) timed "$part" in_debian bookworm arm64 aarch64-unknown-linux-gnu tarball ;;
        musl) timed "$part" musl ;;
        pages-64k) timed "$part" pages_64k ;;
        sdist) timed "$part" sdist ;;
        *)
            echo "unknown part $part (glibc-x86_64 wheel-x86_64 glibc-aarch64 musl pages-64k sdist)" >&2
            exit 2
            ;;
    esac
done
echo "check times:"
printf '  %s\n' "${timings[@]}"
echo "all checks passed"
