#!/usr/bin/env bash
# Compares tcg-single with tcg-multi on one arch and QEMU, same seed, runs
# interleaved so both modes see the same host load: the measurement behind
# the default accelerator of a QEMU (docs/tcg.md). Prints one row a
# run: verdict, wall seconds, the churn's transitions per second (0 for a
# storm), and the attach median.
#   usage: scripts/accel-compare.sh ARCH QEMU RUNS [fth run flags...]
#   e.g.   scripts/accel-compare.sh x86_64 11.1 2 --agent-arg scenario=churn --agent-arg churn=2m
#          scripts/accel-compare.sh riscv64 11.1 1
set -euo pipefail
arch=${1:?usage: accel-compare.sh ARCH QEMU RUNS [fth run flags...]}
q=${2:?QEMU}
runs=${3:?RUNS}
shift 3
cd "$(dirname "$0")/.."
make -s fth
id=accel-$arch-q$q-$(date -u +%Y%m%d-%H%M%S)
for i in $(seq 1 "$runs"); do
	for mode in tcg-single tcg-multi; do
		bin/fth run --arch "$arch" --qemu "$q" --accel "$mode" --seed 42 "$@" \
			--out "out/runs/$id" --run-id "$mode-$i" >"out/runs/$id-$mode-$i.log" 2>&1 || true
	done
done
printf '%-11s %-3s %-7s %-7s %-13s %-9s %s\n' MODE RUN VERDICT SECONDS TRANSITIONS/S ATTACH-P50 TITLE
for f in out/runs/"$id"/*/*/result.json; do
	python3 - "$f" "$(basename "$(dirname "$(dirname "$f")")")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
mode, i = sys.argv[2].rsplit("-", 1)
args = r.get("request", {}).get("agent_args", {})
tr = sum(p.get("attempted", 0) for p in (r.get("transitions") or {}).values())
churn = args.get("churn", "")
secs = 0.0
if churn.endswith("m"):
    secs = float(churn[:-1]) * 60
elif churn.endswith("s"):
    secs = float(churn[:-1])
rate = tr / secs if secs else 0.0
att = (r.get("phases") or {}).get("attach") or {}
p50 = (att.get("latency") or {}).get("median", "")
title = r["findings"][0]["title"] if r.get("findings") else r.get("reason", "")
print(f"{mode:<11} {i:<3} {r['verdict']:<7} {r['timings']['total_seconds']:<7.0f} {rate:<13.1f} {str(p50):<9} {title}")
PY
done
