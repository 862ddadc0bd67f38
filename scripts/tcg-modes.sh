#!/usr/bin/env bash
# Compares QEMU TCG thread modes under the x86_64 attach storm: runs the same
# cell RUNS times per mode (same seed) and tabulates the verdicts and titles.
# This is the measurement behind the default accelerator (see README).
#   usage: scripts/tcg-modes.sh [RUNS] [N]
set -euo pipefail
runs=${1:-4}
n=${2:-2000}
cd "$(dirname "$0")/.."
make -s fth
id=tcg-modes-$(date -u +%Y%m%d-%H%M%S)
for mode in tcg-multi tcg-single; do
	for i in $(seq 1 "$runs"); do
		bin/fth run --arch x86_64 --accel "$mode" --n "$n" --seed 42 --hold 10s \
			--out "out/runs/$id" --run-id "$mode-$i" >/dev/null 2>&1 || true
	done
done
printf '%-12s %-4s %-8s %s\n' MODE RUN VERDICT TITLE
for f in out/runs/"$id"/*/*/result.json; do
	run=$(basename "$(dirname "$(dirname "$f")")")
	python3 - "$f" "$run" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
mode, i = sys.argv[2].rsplit("-", 1)
title = r["findings"][0]["title"] if r.get("findings") else r.get("reason", "")
print(f"{mode:<12} {i:<4} {r['verdict']:<8} {title}")
PY
done
