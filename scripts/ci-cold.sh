#!/usr/bin/env bash
# Times `bash .ci/run` as a fresh machine runs it: a fresh clone of this
# tree's HEAD, every cache of the project empty. /var/cache/fth (kernels,
# ccache, images, the toolchain root, kernel sources) is moved aside for the
# run and put back after it, and Go's module and build caches point at empty
# directories. Debian packages stay installed. Prints the exit code and the
# seconds; ci.log has every line with the time it was printed. Needs the
# disk for a second cache (about 15 GB) and nothing else of fth running.
#   usage: scripts/ci-cold.sh [WORKDIR]     (default /var/tmp/ci-cold-<time>)
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${FTH_CI_COLD_CACHE:-/var/cache/fth}
w=${1:-/var/tmp/ci-cold-$(date +%Y%m%d-%H%M%S)}
if [ -e "$cache.warm" ]; then
	echo "ci-cold: $cache.warm exists (an earlier run did not finish?); put it back as $cache first" >&2
	exit 2
fi
mkdir -p "$w"
git clone -q "$repo" "$w/clone" || exit 2
[ -e "$cache" ] && mv "$cache" "$cache.warm"
restore() {
	if [ -e "$cache" ]; then rm -rf "$w/fth-cold" && mv "$cache" "$w/fth-cold"; fi
	[ -e "$cache.warm" ] && mv "$cache.warm" "$cache"
}
trap restore EXIT
trap 'exit 130' INT TERM
cd "$w/clone"
export GOMODCACHE=$w/gomod GOCACHE=$w/gocache
start=$(date +%s)
echo "ci-cold: $(git rev-parse --short HEAD) from $(date +%T), log $w/ci.log"
bash .ci/run 2>&1 | while IFS= read -r l; do printf '%(%T)T %s\n' -1 "$l"; done >"$w/ci.log"
rc=${PIPESTATUS[0]}
echo "ci-cold: exit $rc in $(($(date +%s) - start)) s"
du -sh "$cache"/* 2>/dev/null
exit "$rc"
