#!/usr/bin/env bash
# Compares QEMU TCG thread modes, and QEMU versions, under the x86_64 attach
# storm: runs the same cell RUNS times per mode and QEMU (same seed),
# interleaved so that every combination sees the same host load, and
# tabulates the verdicts and titles. This is the measurement behind the
# default accelerator and the MTTCG verdict (see docs/tcg.md).
#   usage: scripts/tcg-modes.sh [RUNS] [N] [QEMUS] [MODES]
#   e.g.   scripts/tcg-modes.sh 5 2000 "7.2 11.1" tcg-multi
set -euo pipefail
runs=${1:-4}
n=${2:-2000}
qemus=${3:-host}
modes=${4:-"tcg-multi tcg-single"}
cd "$(dirname "$0")/.."
make -s fth
id=tcg-modes-$(date -u +%Y%m%d-%H%M%S)
for i in $(seq 1 "$runs"); do
	for q in $qemus; do
		for mode in $modes; do
			bin/fth run --arch x86_64 --accel "$mode" --qemu "$q" --n "$n" --seed 42 --hold 10s \
				--out "out/runs/$id" --run-id "$mode-q$q-$i" >/dev/null 2>&1 || true
		done
	done
done
printf '%-12s %-6s %-4s %-8s %-8s %s\n' MODE QEMU RUN VERDICT SECONDS TITLE
for f in out/runs/"$id"/*/*/result.json; do
	run=$(basename "$(dirname "$(dirname "$f")")")
	python3 - "$f" "$run" <<'PY'
import json, sys
from datetime import datetime
r = json.load(open(sys.argv[1]))
rest, i = sys.argv[2].rsplit("-", 1)
mode, q = rest.rsplit("-q", 1)
title = r["findings"][0]["title"] if r.get("findings") else r.get("reason", "")
def t(s):
    # Go writes nanoseconds; fromisoformat takes at most microseconds.
    base, _, frac = s.rstrip("Z").partition(".")
    return datetime.fromisoformat(base + ("." + frac[:6] if frac else ""))
secs = ""
if r.get("started_at") and r.get("ended_at"):
    secs = f'{(t(r["ended_at"]) - t(r["started_at"])).total_seconds():.0f}'
print(f"{mode:<12} {q:<6} {i:<4} {r['verdict']:<8} {secs:<8} {title}")
PY
done
