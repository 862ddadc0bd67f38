package inventory

import (
	"strings"

	"github.com/ftrace-harness/fth/results/known"
)

// DenyEntry names functions that must never get a trampoline.
type DenyEntry struct {
	// Name is a function name, or a name prefix when Prefix is set.
	Name   string
	Prefix bool
	// Why records where the entry comes from, for whoever edits the table.
	Why string
}

// Match reports whether fn is covered by the entry.
func (d DenyEntry) Match(fn string) bool {
	if d.Prefix {
		return strings.HasPrefix(fn, d.Name)
	}
	return fn == d.Name
}

const (
	whyKernelDeny   = "kernel btf_id_deny (kernel/bpf/verifier.c): called by the trampoline before its recursion check, so tracing it recurses; the verifier rejects it"
	whyKnownFinding = "known finding"
	whyTramp        = "trampoline entry/exit path (kernel/bpf/trampoline.c, notrace today): listed so that a kernel dropping notrace does not turn into unbounded recursion"
)

// DefaultDeny is the deny list. The first group mirrors the kernel's
// BTF_SET btf_id_deny across versions and configs (a name that the running
// kernel does not have costs nothing): attaching there is refused by the
// verifier, so counting it as a failure would only add noise. The second
// group protects the trampoline's own path.
var DefaultDeny = []DenyEntry{
	{Name: "migrate_disable", Why: whyKernelDeny},
	{Name: "migrate_enable", Why: whyKernelDeny},
	// Newer kernels inline migrate_disable/enable and deny the out-of-line
	// halves instead.
	{Name: "__migrate_disable", Why: whyKernelDeny},
	{Name: "__migrate_enable", Why: whyKernelDeny},
	{Name: "___migrate_enable", Why: whyKernelDeny},
	{Name: "rcu_read_unlock_strict", Why: whyKernelDeny + " (!PREEMPT_RCU)"},
	{Name: "preempt_count_add", Why: whyKernelDeny + " (DEBUG_PREEMPT or TRACE_PREEMPT_TOGGLE)"},
	{Name: "preempt_count_sub", Why: whyKernelDeny + " (DEBUG_PREEMPT or TRACE_PREEMPT_TOGGLE)"},
	{Name: "__rcu_read_lock", Why: whyKernelDeny + " (PREEMPT_RCU)"},
	{Name: "__rcu_read_unlock", Why: whyKernelDeny + " (PREEMPT_RCU)"},

	{Name: "__bpf_prog_enter", Prefix: true, Why: whyTramp},
	{Name: "__bpf_prog_exit", Prefix: true, Why: whyTramp},
	{Name: "__bpf_tramp_", Prefix: true, Why: whyTramp},
	{Name: "bpf_prog_inc_misses_counter", Why: whyTramp + " (runs when recursion is detected)"},
	{Name: "bpf_prog_start_time", Why: whyTramp},
}

// KnownDeny is list plus the trigger functions of the known findings
// (results/known): functions the kernel lets us trace that crash it. They
// stay out of random storms and churns, or every run that happens to pick
// one dies of a bug already found; tests/e2e reproduces each one by name,
// so a kernel that fixes it shows up as a changed result.
func KnownDeny(list []DenyEntry) []DenyEntry {
	out := append([]DenyEntry(nil), list...)
	for _, f := range known.All() {
		for _, fn := range f.Funcs {
			out = append(out, DenyEntry{Name: fn, Why: whyKnownFinding + " " + f.ID + ": " + f.Title})
		}
	}
	return out
}

// Denied reports whether fn matches an entry of list.
func Denied(list []DenyEntry, fn string) bool {
	for _, d := range list {
		if d.Match(fn) {
			return true
		}
	}
	return false
}
