// Package known is the list of kernel bugs this harness has already found,
// as data: what triggers each one, on which kernels it was seen, and how it
// is reproduced. The agent avoids the triggers by default, so that every
// random storm or churn does not die of a bug already reported; the host
// reports a failure the known trigger was running into as known rather
// than as a new finding; `--include-known` brings both back, for
// reproduction. Host and guest import this package, so it has no
// dependencies. Each entry is reproduced by an e2e test (Repro), so a
// kernel that fixes one shows up as a failing test.
package known

import "strings"

// Finding is one known kernel bug.
type Finding struct {
	// ID names the finding in result.json and in logs.
	ID string
	// Title is how README's Findings section names it.
	Title string
	// Kernels are the kernel versions (prefixes of VERSION.PATCHLEVEL.
	// SUBLEVEL) it was seen on.
	Kernels []string
	// Funcs are kernel functions whose fentry trampoline triggers it.
	Funcs []string
	// Modules are modules (kernel spelling, ftrace_direct_modify) whose
	// load and unload cycling triggers it.
	Modules []string
	// DeliverUsers are delivery-oracle users (fth_deliver.ko's) that meet
	// it, left out of the delivery churn by default.
	DeliverUsers []string
	// DeliverChanges are changes of the delivery churn that meet it, which
	// the churn does not make by default (the users stay in).
	DeliverChanges []DeliverChange
	// Repro are the `fth run` arguments that reproduce it (with
	// --include-known), and Test the e2e test that runs them.
	Repro []string
	Test  string
}

// DeliverChange is one change of the delivery churn: the attach of
// Attach while every user of Beside is attached (users as the delivery
// oracle names them).
type DeliverChange struct {
	Attach string
	Beside []string
}

// All returns the known findings, in a new slice.
func All() []Finding {
	return []Finding{
		{
			ID:      "rcu-read-unlock-special-fentry",
			Title:   "An fentry trampoline on rcu_read_unlock_special crashes PREEMPT_RCU kernels (recursion through the trampoline's exit path)",
			Kernels: []string{"7.3"},
			Funcs:   []string{"rcu_read_unlock_special"},
			Repro:   []string{"--agent-arg", "funcs=rcu_read_unlock_special", "--hold", "30s"},
			Test:    "TestKnownFindingRCUReadUnlockSpecial",
		},
		{
			ID:      "ftrace-direct-modify-unload-hang",
			Title:   "samples/ftrace/ftrace-direct-modify.ko and ftrace-direct-multi-modify.ko hang x86_64 7.3: my_tramp2 sits at an odd address, which 7.3 reads as a jmp (DYNAMIC_FTRACE_WITH_JMP), so schedule() returns at its entry",
			Kernels: []string{"7.3"},
			Modules: []string{"ftrace_direct_modify", "ftrace_direct_multi_modify"},
			Repro: []string{"--n", "0", "--seed", "42", "--silence", "45s", "--deadline", "9m",
				"--agent-arg", "scenario=churn", "--agent-arg", "churn=180s", "--agent-arg", "hot=8",
				"--agent-arg", "modhold=3s", "--agent-arg", "modlist=ftrace_direct_modify,ftrace_direct_multi_modify"},
			Test: "TestKnownFindingDirectModifyUnload",
		},
		{
			ID:      "ipmodify-share-asked-of-a-stranger",
			Title:   "An IPMODIFY ftrace_ops that takes a function into its filter skips the sharing handshake with a BPF fexit trampoline there (its redirect, livepatch's way, is bypassed on every call), and 7.3's update_ftrace_direct_mod() then asks that trampoline to share: WARNING in bpf_tramp_ftrace_ops_func",
			Kernels: []string{"7.3"},
			// The delivery churn met it through its IPMODIFY ops beside
			// BPF programs; the scripted sequence meets it every time.
			DeliverUsers: []string{"ops-ipmodify"},
			Repro:        []string{"--agent-arg", "scenario=repro", "--agent-arg", "repro=ipmodify-filter"},
			Test:         "TestKnownFindingIPModifyShareAskedOfAStranger",
		},
		{
			ID:      "ipmodify-share-asked-mid-update",
			Title:   "7.3's update_ftrace_direct_mod() asks every BPF trampoline on a function with an IPMODIFY ops (a livepatch) to share, without that trampoline's lock: one whose update is under way (a fexit added to a trampoline that was not sharing: CALL_ORIG set, ORIG_STACK not yet) is marked SHARE_IPMODIFY behind its back, and the next ask warns and refuses with -EBUSY: WARNING in bpf_tramp_ftrace_ops_func",
			Kernels: []string{"7.3"},
			// The livepatch applied first, then a fentry (its trampoline
			// registered without sharing: no CALL_ORIG), then the fexit
			// whose update another trampoline's modify overtakes.
			DeliverChanges: []DeliverChange{{Attach: "fexit", Beside: []string{"livepatch", "fentry"}}},
			Repro:          []string{"--agent-arg", "scenario=repro", "--agent-arg", "repro=ipmodify-mid-update"},
			Test:           "TestKnownFindingIPModifyMidUpdate",
		},
		{
			ID:      "refused-direct-called",
			Title:   "A direct ftrace_ops refused by the IPMODIFY handshake (no ops_func, on a function with an IPMODIFY ops) was on ftrace_ops_list while ftrace_startup() decided, and is taken off with no grace period: a caller it sent to its direct trampoline gets there after register_ftrace_direct() returned the refusal",
			Kernels: []string{"6.12", "7.3"},
			// fth_deliver.ko's direct user has no ops_func: beside either
			// IPMODIFY user its attach is refused, every time.
			DeliverChanges: []DeliverChange{{Attach: "direct", Beside: []string{"livepatch"}}, {Attach: "direct", Beside: []string{"ops-ipmodify"}}},
			Repro:          []string{"--agent-arg", "scenario=repro", "--agent-arg", "repro=refused-direct"},
			Test:           "TestKnownFindingRefusedDirectCalled",
		},
	}
}

// seenOn reports whether f was seen on kernel version v ("" matches).
func (f Finding) seenOn(v string) bool {
	if v == "" {
		return true
	}
	for _, k := range f.Kernels {
		if v == k || strings.HasPrefix(v, k+".") {
			return true
		}
	}
	return false
}

// Funcs returns every known trigger function, for the agent's deny list.
func Funcs() []string {
	var out []string
	for _, f := range All() {
		out = append(out, f.Funcs...)
	}
	return out
}

// Modules returns every known trigger module.
func Modules() []string {
	var out []string
	for _, f := range All() {
		out = append(out, f.Modules...)
	}
	return out
}

// DeliverUsers returns every delivery-oracle user a known finding names.
func DeliverUsers() []string {
	var out []string
	for _, f := range All() {
		out = append(out, f.DeliverUsers...)
	}
	return out
}

// ByDeliverUser returns the known finding that names delivery-oracle user
// name, if one does.
func ByDeliverUser(name string) (Finding, bool) {
	for _, f := range All() {
		for _, u := range f.DeliverUsers {
			if u == name {
				return f, true
			}
		}
	}
	return Finding{}, false
}

// Triggered returns the known finding whose trigger an operation of the
// agent was: phase and target as the agent's op events name them (an
// attach of function name, a module_load of module name), on kernel
// version v.
func Triggered(phase, target, v string) (Finding, bool) {
	for _, f := range All() {
		if !f.seenOn(v) {
			continue
		}
		names := f.Funcs
		if strings.HasPrefix(phase, "module_") {
			names = f.Modules
		}
		for _, n := range names {
			if n == target {
				return f, true
			}
		}
	}
	return Finding{}, false
}
