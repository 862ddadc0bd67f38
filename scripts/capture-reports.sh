#!/usr/bin/env bash
# Captures real kernel reports for results/console's corpus: boots the
# debug/triage kernel of an arch once per report kind, asks the kernel for
# that report (--crash lkdtm:<TYPE> or bug:<name>, after a small attach
# storm, so trampolines are live when it prints), and copies each console
# log into results/console/testdata/<arch>/ behind the corpus's blank
# header line. The first cell of every arch is the negative one: the same
# debug kernel, a 200-trampoline storm, and no injection, whose log must
# give no finding.
#
#   scripts/capture-reports.sh x86_64 [mode ...]
#
# Then `go test ./results/console -run TestCorpus -update` writes each
# fixture's TITLE/KIND header from the parser; check every header by hand
# against the log before committing (results/console/testdata/SOURCES.md).
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:?usage: capture-reports.sh <arch> [mode ...]}
shift

# ppc64le's trampolines need gcc 14 and QEMU 11.1 from the toolchain root,
# its defaults; book3s64 has no HAVE_ARCH_VMAP_STACK; and its lockdep warns
# at every boot and turns itself off (docs/findings.md, 6), so no lockdep
# report can be captured there and no lockdep boot can be a negative one.
vmap=,debug/vmap-stack
lockdep=,debug/lockdep
case $arch in
x86_64) ftrace=ftrace/direct-calls ;;
arm64 | riscv64) ftrace=ftrace/call-ops ;;
ppc64le) ftrace=ftrace/direct-calls vmap= lockdep= ;;
*) echo "capture-reports: unknown arch $arch" >&2; exit 3 ;;
esac
fragments="base,arch/$arch,$ftrace,preempt/full$lockdep,debug/kasan,debug/selftest$vmap,debug/triage"

# The kinds, in the order they run: the non-fatal ones first.
bugs="bad-unlock held-lock-freed locks-held-at-exit recursive-lock circular-lock
non-static-key uninit-mutex rcu-outside-reader inconsistent-lock sleep-in-atomic
smp-processor-id this-cpu-read free-active-timer leak"
lkdtm_common="WARNING REFCOUNT_DEC_ZERO REFCOUNT_DEC_NEGATIVE REFCOUNT_ADD_ZERO USERCOPY_SLAB_SIZE_TO
READ_AFTER_FREE SLAB_LINEAR_OVERFLOW SLAB_FREE_DOUBLE CORRUPT_LIST_ADD BUG
EXCEPTION ACCESS_NULL EXHAUST_STACK SOFTLOCKUP"

# Other arches: the faults whose format is the arch's own (oops, BUG, the
# fault and stack-overflow reports), and one report of each checker.
short="none bug:smp-processor-id bug:non-static-key lkdtm:WARNING lkdtm:BUG
lkdtm:ACCESS_NULL lkdtm:REFCOUNT_ADD_ZERO lkdtm:READ_AFTER_FREE
lkdtm:EXHAUST_STACK"

if [ $# -gt 0 ]; then
	modes="$*"
elif [ "$arch" != x86_64 ]; then
	modes=$short
else
	modes="none"
	for b in $bugs; do modes="$modes bug:$b"; done
	for t in $lkdtm_common; do modes="$modes lkdtm:$t"; done
fi

make fth >/dev/null
if ! built=$(bin/fth build --arch "$arch" --fragments "$fragments" 2>&1); then
	printf '%s\n' "$built" >&2
	echo "capture-reports: the $arch debug kernel did not build" >&2
	exit 2
fi
release=$(printf '%s\n' "$built" | sed -n 's/.*release=\([^ ]*\).*/\1/p' | tail -1)
release=${release:-7.3.4}
out=out/capture
# The corpus is by kernel arch: powerpc, not ppc64le.
corpus=results/console/testdata/$arch
[ "$arch" = ppc64le ] && corpus=results/console/testdata/powerpc
mkdir -p "$out" "$corpus"
for mode in $modes; do
	slug=$(printf '%s' "$mode" | tr 'A-Z_:' 'a-z--')
	if [ "$mode" = none ]; then
		name="clean-debug-triage-storm-fth-$release"
		args=(-n 200)
	else
		name="$slug-fth-$release"
		# ftrace=nop starts the nop tracer at boot, which turns the
		# remaining self-tests off (kernel/trace/trace.c): the negative
		# cell ran them, and each capture would wait minutes for them.
		args=(-n 20 --hold 1s --crash "$mode" --kernel-arg ftrace=nop)
		# The harness's command line puts RCU Tasks' pre-stall line
		# 300 s out (75000 jiffies, for TCG); the injected holdout
		# lasts 14 s, so this capture asks for the kernel's default, 10 s.
		case $mode in
		bug:rcu-tasks-holdout) args+=(--kernel-arg rcupdate.rcu_task_stall_info=2500) ;;
		# HARDENED_USERCOPY_DEFAULT_ON is off in 7.3's defaults: without
		# this, LKDTM says "FAIL: bad copy_to_user() not detected!".
		lkdtm:USERCOPY_*) args+=(--kernel-arg hardened_usercopy=1) ;;
		esac
	fi
	id="capture-$arch-$slug-$(date +%s)"
	echo "capture: $arch $mode -> $name" >&2
	# Exit 1 (a kernel failure) is what a provoked report gives.
	rc=0
	# --silence 10m: the function_graph self-test prints nothing until it
	# passes (one pr_cont line), and under TCG with KASAN and lockdep it
	# took 4 min 48 s on x86_64.
	bin/fth run --arch "$arch" --fragments "$fragments" --silence 10m --deadline 20m --out "$out" --run-id "$id" "${args[@]}" >"$out/$id.log" 2>&1 || rc=$?
	log=$(ls "$out/$id"/*/console.log 2>/dev/null | head -1)
	if [ -z "$log" ]; then
		echo "capture: $mode: no console.log (fth exit $rc; see $out/$id.log)" >&2
		continue
	fi
	{ echo; cat "$log"; } >"$corpus/$name"
	echo "capture: $mode: fth exit $rc, $(wc -c <"$log") bytes" >&2
done
