#!/bin/bash
# The failure rate of one cell, measured: runs `fth run` with the given
# flags once per seed, from FIRST to FIRST+RUNS-1, and counts the runs
# whose verdict is fail. Each run's seed, verdict and title go to
# stdout (and to OUT/rate.txt, appended as they happen), then
# "k/n failed". This is how docs/bisect.md's flaky reproducer was
# calibrated.
#
# Usage: scripts/flaky-rate.sh RUNS FIRST OUT -- <fth run flags>
#   e.g. scripts/flaky-rate.sh 20 1 out/flaky -- --arch x86_64 \
#          --patch mutants/bpf-tramp-skip-rcu-tasks.patch \
#          --agent-arg scenario=race --agent-arg racetarget=trampoline \
#          --agent-arg injections=1 --agent-arg injectfrom=random
set -u
if [ $# -lt 4 ] || [ "$4" != "--" ]; then
	echo "usage: $0 RUNS FIRST OUT -- <fth run flags>" >&2
	exit 3
fi
runs=$1 first=$2 out=$3
shift 4
fth=${FTH:-bin/fth}
mkdir -p "$out"
failed=0
for ((i = 0; i < runs; i++)); do
	seed=$((first + i))
	id=seed-$seed
	"$fth" run --out "$out" --run-id "$id" --seed "$seed" "$@" >"$out/$id.log" 2>&1
	code=$?
	case $code in
	0) verdict=pass title= ;;
	1)
		verdict=fail
		# fth's last line: "fth: kernel failures found: <cell>: <reason>".
		title=$(sed -n 's/^fth: kernel failures found: [^:]*: //p' "$out/$id.log" | tail -1)
		failed=$((failed + 1))
		;;
	*)
		echo "seed $seed: fth run exited $code (not a verdict; see $out/$id.log)" | tee -a "$out/rate.txt"
		exit 2
		;;
	esac
	echo "seed $seed: $verdict ${title:+($title)}" | tee -a "$out/rate.txt"
done
echo "$failed/$runs failed" | tee -a "$out/rate.txt"
