#!/usr/bin/env bash
# Builds the Debian trixie toolchain root: QEMU 11.1, gcc-14 (native and
# cross), clang/lld-21, and what a kernel build needs, in a directory under
# the cache, with Debian's own mmdebstrap. fth runs builds and QEMU inside it
# through bwrap (bubblewrap) when a cell asks for --toolchain gcc-14|clang-21
# or --qemu 11.1; the host keeps its own gcc 12, clang 19 and QEMU 7.2.
#
# The root is keyed by scripts/toolroot/packages: /var/cache/fth/roots/
# trixie-<sha256 of that file, 16 hex>. An existing root with a complete
# marker is kept; a changed list makes a new one (old roots are removed).
#
# `toolroot.sh path` prints the root's path without building anything.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
list="$here/toolroot/packages"
ROOTS=${FTH_ROOTS:-${FTH_CACHE:-/var/cache/fth}/roots}

log() { printf 'toolroot: %s\n' "$*" >&2; }

key=$(grep -v '^[[:space:]]*#' "$list" | tr -s ' \t\n' '\n' | sed '/^$/d' | sort | sha256sum | cut -c1-16)
root="$ROOTS/trixie-$key"

if [ "${1:-}" = path ]; then
	printf '%s\n' "$root"
	exit 0
fi

if [ -f "$root/.fth-complete" ]; then
	log "root up to date at $root ($(du -sh "$root" 2>/dev/null | cut -f1))"
	exit 0
fi

for tool in mmdebstrap bwrap; do
	command -v "$tool" >/dev/null || { echo "toolroot: $tool missing: make deps installs it (apt-get install mmdebstrap bubblewrap)" >&2; exit 1; }
done

# The mirror this machine already uses, never a hard-coded one.
uri=$(awk '/^URIs:/ && !/security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
	uri=$(awk '$1=="deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$uri" ] || { echo "toolroot: cannot find this machine's apt mirror in /etc/apt/sources.list{,.d/debian.sources}" >&2; exit 1; }

pkgs=$(grep -v '^[[:space:]]*#' "$list" | tr -s ' \t\n' ',' | sed 's/^,//; s/,$//')
mkdir -p "$ROOTS"
tmp="$root.tmp"
rm -rf "$tmp"
log "building $root from $uri (trixie, trixie-backports); this takes minutes"
start=$(date +%s)
# --variant=apt: Essential plus apt, then only what the list names and its
# dependencies (no recommends). The root is made by the real root user on
# this machine; fth later enters it unprivileged with bwrap.
# Backports at the same priority as trixie: QEMU 11.1 needs backports'
# seabios, ipxe and the like too, which the list need not name one by one.
mmdebstrap --variant=apt --mode=root \
	--aptopt='APT::Install-Recommends "false"' \
	--setup-hook='mkdir -p "$1/etc/apt/preferences.d" && printf "Package: *\nPin: release n=trixie-backports\nPin-Priority: 500\n" > "$1/etc/apt/preferences.d/backports"' \
	--include="$pkgs" \
	trixie "$tmp" \
	"deb $uri trixie main" \
	"deb $uri trixie-backports main"
# Write the list into the root, so `fth` can say what a root holds.
cp "$list" "$tmp/.fth-packages"
touch "$tmp/.fth-complete"
for old in "$ROOTS"/trixie-*; do
	[ "$old" = "$tmp" ] || [ "$old" = "$root" ] || rm -rf "$old"
done
mv "$tmp" "$root"
log "root ready at $root in $(( $(date +%s) - start )) s, $(du -sh "$root" | cut -f1)"
