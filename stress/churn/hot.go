// Package churn drives a small set of hot kernel functions through callsite
// states — none, one fentry, several fentry/fexit (the trampoline
// regenerated), fentry plus the function tracer, fentry plus a kprobe —
// and back, in seeded random orders, timing every transition and checking
// the func-ip oracle after every cycle. The bugs it hunts are races between
// one CPU rewriting a function's entry and another CPU, or a preempted task,
// executing it: the functions are chosen so that the hammer is always
// executing them.
package churn

import (
	"math/rand/v2"
	"slices"
	"strings"
)

// helpers are kernel functions the syscalls reach directly, by syscall name.
// Any that this kernel lacks, or cannot trace, are skipped.
var helpers = map[string][]string{
	"getpid":            {"__task_pid_nr_ns"},
	"newuname":          {"override_release"},
	"clock_gettime":     {"posix_get_monotonic_timespec", "ktime_get_ts64", "put_timespec64"},
	"getrusage":         {"getrusage"},
	"openat":            {"do_sys_openat2", "getname_flags"},
	"read":              {"vfs_read", "seq_read_iter", "proc_tgid_stat", "do_task_stat"},
	"close":             {"close_fd"},
	"nanosleep":         {"hrtimer_nanosleep", "do_nanosleep", "common_nsleep"},
	"clock_nanosleep":   {"hrtimer_nanosleep", "do_nanosleep", "common_nsleep"},
	"sched_yield":       {"do_sched_yield", "yield_task_fair"},
	"sched_setaffinity": {"__sched_setaffinity"},
}

// Aliases are other kernel names of a hammer syscall: Go's Uname is
// newuname or uname depending on the architecture's table, and the
// nanosleep of older tables is clock_nanosleep on newer ones.
var Aliases = map[string][]string{
	"newuname":  {"uname"},
	"nanosleep": {"clock_nanosleep"},
}

// compatPrefixes are syscall-wrapper prefixes of compat entry points, which
// a 64-bit hammer never reaches.
var compatPrefixes = []string{"ia32", "x32"}

// wrapperPrefix returns p if fn is "__<p>_sys_<name>" for a p made of
// lower-case letters and digits: the arch wrappers (__x64_sys_, __arm64_sys_,
// __riscv_sys_) and the generic __se_sys_ and __do_sys_.
func wrapperPrefix(fn, name string) (string, bool) {
	rest, ok := strings.CutPrefix(fn, "__")
	if !ok {
		return "", false
	}
	p, ok := strings.CutSuffix(rest, "_sys_"+name)
	if !ok || p == "" {
		return "", false
	}
	for _, r := range p {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return "", false
		}
	}
	return p, true
}

// SyscallFuncs returns the candidates on the paths of syscalls, in the
// order of syscalls and, per syscall, wrappers before helpers; each name
// once. cands must be sorted, so that the order does not depend on how the
// caller built the list.
func SyscallFuncs(cands []string, syscalls []string) []string {
	have := make(map[string]bool, len(cands))
	for _, c := range cands {
		have[c] = true
	}
	var out []string
	seen := map[string]bool{}
	add := func(fn string) {
		if have[fn] && !seen[fn] {
			seen[fn] = true
			out = append(out, fn)
		}
	}
	for _, sc := range syscalls {
		for _, name := range append([]string{sc}, Aliases[sc]...) {
			for _, c := range cands {
				if p, ok := wrapperPrefix(c, name); ok && !slices.Contains(compatPrefixes, p) {
					add(c)
				}
			}
			add("sys_" + name)
			add("ksys_" + name)
			for _, h := range helpers[name] {
				add(h)
			}
		}
	}
	return out
}

// EntryFunc returns the function a syscall enters first in this kernel: the
// arch wrapper (__x64_sys_getppid, __arm64_sys_getppid, ...), else
// sys_<name>, else the generic wrappers. "" if none is a candidate.
func EntryFunc(cands []string, syscall string) string {
	have := make(map[string]bool, len(cands))
	for _, c := range cands {
		have[c] = true
	}
	for _, c := range cands {
		p, ok := wrapperPrefix(c, syscall)
		if ok && p != "se" && p != "do" && !slices.Contains(compatPrefixes, p) {
			return c
		}
	}
	for _, fn := range []string{"sys_" + syscall, "__se_sys_" + syscall, "__do_sys_" + syscall} {
		if have[fn] {
			return fn
		}
	}
	return ""
}

// Hot is the chosen hot set.
type Hot struct {
	// Funcs are the hot functions: syscall-path ones first.
	Funcs []string
	// SyscallPath are the Funcs found on the syscall paths.
	SyscallPath []string
}

// hotStream separates the hot-set draw from the agent's other seeded
// streams (function selection, hammer threads).
const hotStream = 0x6674686874736574

// SelectHot picks k functions: those of SyscallFuncs(cands, syscalls)
// first (a seeded sample of k of them if there are more), then a seeded
// sample of the other candidates. Functions for which keep returns false
// are never picked (nil keeps all). cands must be sorted.
func SelectHot(cands []string, syscalls []string, k int, seed int64, keep func(string) bool) Hot {
	ok := func(fn string) bool { return keep == nil || keep(fn) }
	rng := rand.New(rand.NewPCG(uint64(seed), hotStream))
	var path []string
	for _, fn := range SyscallFuncs(cands, syscalls) {
		if ok(fn) {
			path = append(path, fn)
		}
	}
	if len(path) > k {
		rng.Shuffle(len(path), func(i, j int) { path[i], path[j] = path[j], path[i] })
		path = path[:k]
	}
	h := Hot{Funcs: slices.Clone(path), SyscallPath: slices.Clone(path)}
	chosen := make(map[string]bool, len(path))
	for _, fn := range path {
		chosen[fn] = true
	}
	var rest []string
	for _, fn := range cands {
		if !chosen[fn] && ok(fn) {
			rest = append(rest, fn)
		}
	}
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, fn := range rest {
		if len(h.Funcs) >= k {
			break
		}
		h.Funcs = append(h.Funcs, fn)
	}
	return h
}
