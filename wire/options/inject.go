package options

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Test-only modes: faults the agent injects on purpose, so that the
// host's crash, hang and oracle detection can be shown to work.

// Crash modes.
const (
	// CrashNone does not crash the guest.
	CrashNone = ""
	// CrashSysrqC writes 'c' to /proc/sysrq-trigger after the attach phase,
	// so that the host's crash detection can be tested against a known panic.
	CrashSysrqC = "sysrq-c"
	// CrashHungTask loads fth_target after the attach phase, lowers the
	// hung task timeout to HungTaskTimeout and leaves one agent thread
	// asleep in D state, then goes on as usual: a partial hang, which the
	// host must report and end the cell on while the agent still talks.
	CrashHungTask = "hung-task"
	// CrashRTInversion starts two agent threads at SCHED_FIFO on CPU 0
	// after the attach phase, the higher one spinning above the lower one
	// for good: a stall the harness causes itself (RCU-tasks waits for the
	// starved thread), which the host must classify as harness-induced.
	CrashRTInversion = "rt-inversion"
	// CrashLKDTMPrefix, followed by an LKDTM crash type (lkdtm:WARNING),
	// writes the type to /sys/kernel/debug/provoke-crash/DIRECT after the
	// attach phase: the kernel's own catalogue of faults and reports
	// (CONFIG_LKDTM, kconfigs/debug/triage), for the console parser's
	// captured fixtures.
	CrashLKDTMPrefix = "lkdtm:"
	// CrashBugPrefix, followed by one of Bugs (bug:bad-unlock), commits
	// that injected bug of fth_target.ko (stress/kmod-target/bugs.c) after the
	// attach phase.
	CrashBugPrefix = "bug:"
)

const crashModes = `want "none", "sysrq-c", "hung-task", "rt-inversion", "lkdtm:<TYPE>" (an LKDTM crash type such as lkdtm:WARNING) or "bug:<name>" (` + "`fth_target`'s injected bugs: bad-unlock, held-lock-freed, ...)"

// Bugs are the injected bugs of fth_target.ko, as its bugs.c names them
// (a test keeps the two lists equal).
var Bugs = []string{
	"bad-unlock", "held-lock-freed", "locks-held-at-exit", "recursive-lock",
	"circular-lock", "non-static-key", "uninit-mutex", "rcu-outside-reader",
	"inconsistent-lock", "sleep-in-atomic", "smp-processor-id",
	"this-cpu-read", "free-active-timer", "leak", "divide-error",
	"gpf-non-canonical", "illegal-instruction", "netdev-refcount-leak",
	"rcu-tasks-holdout", "warn-in-ftrace-callback", "warn-via-trampoline",
	"gpf-maybe-for-address", "gpf-segment", "double-fault", "external-abort",
	"bad-frame-pointer",
}

// BugViaTrampoline is the bug the agent first puts a BPF fexit trampoline
// on: its WARN's stack runs through the trampoline.
const BugViaTrampoline = "warn-via-trampoline"

// BugViaTrampolineFunc is that bug's function in fth_target.ko.
const BugViaTrampolineFunc = "fth_bug_warn_traced"

// bugArches names the only arches an injected bug traps on, for the bugs
// that are not everywhere: arm64 and riscv define a division by zero, and
// only x86_64 has non-canonical addresses.
var bugArches = map[string][]string{
	"divide-error":          {"x86_64"},
	"gpf-non-canonical":     {"x86_64"},
	"gpf-maybe-for-address": {"x86_64"},
	"gpf-segment":           {"x86_64"},
	"double-fault":          {"x86_64"},
	"external-abort":        {"arm64"},
	"bad-frame-pointer":     {"x86_64"},
}

// CheckCrashArch refuses an injected bug that cannot happen on arch (the
// harness's arch name), so the error comes before the kernel build.
func CheckCrashArch(crash, arch string) error {
	b, ok := strings.CutPrefix(crash, CrashBugPrefix)
	if !ok {
		return nil
	}
	if only, ok := bugArches[b]; ok && !slices.Contains(only, arch) {
		return fmt.Errorf("injected bug %q happens only on %s, not %s", b, strings.Join(only, ", "), arch)
	}
	return nil
}

// BugLeak is the bug whose report needs a kmemleak scan after it.
const BugLeak = "leak"

// parseCrash checks a crash mode, the prefixed ones included.
func parseCrash(v string) (string, error) {
	switch v {
	case "", "none":
		return CrashNone, nil
	case CrashSysrqC, CrashHungTask, CrashRTInversion:
		return v, nil
	}
	if t, ok := strings.CutPrefix(v, CrashLKDTMPrefix); ok {
		if t == "" || strings.TrimLeft(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
			return "", fmt.Errorf("LKDTM type %q: want upper case letters, digits and _, e.g. lkdtm:WARNING (reading /sys/kernel/debug/provoke-crash/DIRECT in the guest lists the kernel's types)", t)
		}
		return v, nil
	}
	if b, ok := strings.CutPrefix(v, CrashBugPrefix); ok {
		if !slices.Contains(Bugs, b) {
			return "", fmt.Errorf("no injected bug %q: want one of %s", b, strings.Join(Bugs, ", "))
		}
		return v, nil
	}
	return "", errors.New(crashModes)
}

// HungTaskTimeout is what crash=hung-task sets kernel.hung_task_timeout_secs
// to, in seconds, so the report comes within seconds rather than minutes.
const HungTaskTimeout = 2

// Sabotage modes: test-only ways to make an oracle see what it must
// catch, so that a test can show the oracle fails the cell.
const (
	SabotageNone = ""
	// SabotageWrongIP makes every func-ip program expect an address off
	// by SabotageSkew from the one it is attached to.
	SabotageWrongIP = "wrong-ip"
	// SabotageSkipCount makes each exact-count window make one call fewer
	// than it expects.
	SabotageSkipCount = "skip-count"
	// SabotageDropCall makes every delivery-oracle user of fth_deliver.ko
	// drop one call in SabotageDropEvery.
	SabotageDropCall = "drop-call"
)

// SabotageDropEvery is the drop-call sabotage's N.
const SabotageDropEvery = 1000
