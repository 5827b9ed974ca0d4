#!/bin/sh
# Prints the Debian archive this machine's apt takes its packages from
# (e.g. http://deb.debian.org/debian): the first enabled source of binary
# packages for a release suite (not -security), from
# /etc/apt/sources.list.d/*.sources (deb822) or a `deb` line of
# /etc/apt/sources.list*. Fails when there is none.
#
# Usage: dist/debian-mirror.sh [APT_DIR]   (default /etc/apt)
set -eu
apt=${1:-/etc/apt}
mirror=$(
    {
        for f in "$apt"/sources.list.d/*.sources; do
            [ -e "$f" ] && { cat "$f"; echo; }
        done
    } | awk '
        function flush() {
            if (!found && types ~ /(^| )deb( |$)/ && enabled != "no" && suites ~ /(^| )[a-z]+( |$)/ && uris != "") {
                split(uris, u, " "); print u[1]; found = 1
            }
            types = ""; suites = ""; uris = ""; enabled = ""
        }
        /^[ \t]*$/ { flush(); next }
        /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
        /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
        /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
        /^Enabled:/ { sub(/^Enabled:[ \t]*/, ""); enabled = $0 }
        END { flush() }
    '
)
if [ -z "$mirror" ]; then
    mirror=$(cat "$apt"/sources.list "$apt"/sources.list.d/*.list 2> /dev/null \
        | awk '$1 == "deb" {
                 i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                 if ($(i + 1) ~ /^[a-z]+$/) { print $i; exit }
               }')
fi
[ -n "$mirror" ] || { echo "no Debian archive in the apt sources" >&2; exit 1; }
echo "${mirror%/}"
