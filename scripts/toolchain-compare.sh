#!/usr/bin/env bash
# Compares compilers on one arch: the same default cell, seed and QEMU, one
# kernel per toolchain (each built first if the cache lacks it, one build at a
# time), runs interleaved so every toolchain sees the same host load: the
# measurement behind an arch row's DefaultToolchain (docs/toolchains.md).
# Prints one row a run: verdict, wall seconds, boot to agent, attach p50/p99
# and detach p50 in ms, and the wall seconds of `fth build` (a cache hit is a
# few seconds; a cold build is minutes).
#   usage: scripts/toolchain-compare.sh ARCH RUNS TOOLCHAINS [fth run flags...]
#   e.g.   scripts/toolchain-compare.sh riscv64 1 host,gcc-14,clang-21
set -euo pipefail
arch=${1:?usage: toolchain-compare.sh ARCH RUNS TOOLCHAINS [fth run flags...]}
runs=${2:?RUNS}
IFS=, read -r -a tcs <<<"${3:?TOOLCHAINS, e.g. host,gcc-14}"
shift 3
cd "$(dirname "$0")/.."
make -s fth
id=tc-$arch-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "out/runs/$id"
for tc in "${tcs[@]}"; do
	s=$(date +%s)
	bin/fth build --arch "$arch" --toolchain "$tc" >"out/runs/$id/build-$tc.log" 2>&1
	echo "$(( $(date +%s) - s ))" >"out/runs/$id/build-$tc.seconds"
done
for i in $(seq 1 "$runs"); do
	for tc in "${tcs[@]}"; do
		bin/fth run --arch "$arch" --toolchain "$tc" --seed 42 "$@" \
			--out "out/runs/$id" --run-id "$tc-$i" >"out/runs/$id/run-$tc-$i.log" 2>&1 || true
	done
done
printf '%-9s %-3s %-7s %-7s %-7s %-15s %-9s %-8s %s\n' TOOLCHAIN RUN VERDICT SECONDS BOOT-S ATTACH-P50/P99 DETACH-P50 BUILD-S COMPILER
for f in out/runs/"$id"/*/*/result.json; do
	run=$(basename "$(dirname "$(dirname "$f")")")
	python3 - "$f" "$run" "out/runs/$id/build-${run%-*}.seconds" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
tc, i = sys.argv[2].rsplit("-", 1)
secs = open(sys.argv[3]).read().strip()
ph = r.get("phases") or {}
def lat(name, key):
    v = ((ph.get(name) or {}).get("latency") or {}).get(key)
    return "-" if v is None else f"{v:.1f}"
boot = (r.get("timings") or {}).get("boot_to_agent_seconds")
boot = "-" if boot is None else f"{boot:.1f}"
print(f"{tc:<9} {i:<3} {r['verdict']:<7} {r['timings']['total_seconds']:<7.0f} {boot:<7} "
      f"{lat('attach','median')+'/'+lat('attach','p99'):<15} {lat('detach','median'):<9} {secs:<8} {r['kernel'].get('toolchain','')}")
PY
done
