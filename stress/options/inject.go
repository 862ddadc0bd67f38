package options

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
)

const crashModes = `want "none", "sysrq-c", "hung-task" or "rt-inversion"`

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
)
