// Package benchopts is the bench scenario's configuration and its text
// forms: which parts run, the ftrace-ops sweep, the counts of the scaling
// curve and the multi links. It has no dependencies, so that the agent's
// option table (wire/options), which the host also reads to check
// --agent-arg, can hold the bench's options without importing the bench.
package benchopts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Parts of the bench scenario, in the order it runs them.
const (
	Ops     = "ops"
	Syscall = "syscall"
	Scaling = "scaling"
	Multi   = "multi"
	// MultiLive is per-link attach and detach cost with a growing
	// tracing_multi population live beside it.
	MultiLive = "multilive"
	Wakeup    = "wakeup"
)

// MultiLiveSamples is how many per-link trampolines the multilive part
// attaches and detaches at each population size.
const MultiLiveSamples = 200

// Parts lists every bench part in run order, in a new slice.
func Parts() []string { return []string{Ops, Syscall, Scaling, Multi, MultiLive, Wakeup} }

// DefaultParts are the parts a bench runs when none are named: all but
// multilive, which needs its population sizes (multiliven) and tens of
// minutes at the sizes it is for.
func DefaultParts() []string { return []string{Ops, Syscall, Scaling, Multi, Wakeup} }

// OpsPoint is one configuration of the kernel's ftrace-ops sample module:
// how many ftrace_ops trace the timed function (Relevant) and another one
// (Irrelevant), and whether they ask for full pt_regs (SaveRegs). Its text
// form is "R:I", or "R:I:regs" with SaveRegs.
type OpsPoint struct {
	Relevant   int
	Irrelevant int
	SaveRegs   bool
}

// String is the text form opssweep takes.
func (p OpsPoint) String() string {
	s := strconv.Itoa(p.Relevant) + ":" + strconv.Itoa(p.Irrelevant)
	if p.SaveRegs {
		s += ":regs"
	}
	return s
}

// DefaultOpsSweep is the ftrace-ops sweep run unless opssweep says
// otherwise: small, because every point is a module load per run, yet
// enough to show the single-op fast path against the list function
// (relevant 2, 10), the cost irrelevant ops put on every callsite, and
// saving full registers.
func DefaultOpsSweep() []OpsPoint {
	return []OpsPoint{{1, 0, false}, {2, 0, false}, {10, 0, false}, {1, 10, false}, {1, 100, false}, {1, 0, true}}
}

// FullOpsSweep is the cross product opssweep=full runs: relevant 1, 2, 10 by
// irrelevant 0, 10, 100 by save_regs off and on.
func FullOpsSweep() []OpsPoint {
	var out []OpsPoint
	for _, regs := range []bool{false, true} {
		for _, irr := range []int{0, 10, 100} {
			for _, rel := range []int{1, 2, 10} {
				out = append(out, OpsPoint{rel, irr, regs})
			}
		}
	}
	return out
}

// maxOps bounds nr_ops_relevant and nr_ops_irrelevant: each op is an
// ftrace_ops registration, which patches text, so thousands would take
// minutes under TCG for no new information.
const maxOps = 1000

// ParseOpsSweep parses a comma-separated list of OpsPoint text forms, or
// "full" for FullOpsSweep. An empty list is valid: the baseline alone.
func ParseOpsSweep(v string) ([]OpsPoint, error) {
	if v == "full" {
		return FullOpsSweep(), nil
	}
	var out []OpsPoint
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		f := strings.Split(item, ":")
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "regs") {
			return nil, fmt.Errorf("%q: want relevant:irrelevant or relevant:irrelevant:regs", item)
		}
		rel, err1 := strconv.Atoi(f[0])
		irr, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || rel < 0 || irr < 0 || rel > maxOps || irr > maxOps {
			return nil, fmt.Errorf("%q: op counts must be integers from 0 to %d", item, maxOps)
		}
		out = append(out, OpsPoint{Relevant: rel, Irrelevant: irr, SaveRegs: len(f) == 3})
	}
	return out, nil
}

func FormatOpsSweep(ps []OpsPoint) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// ParseParts parses benchparts: known names, comma-separated, or "all".
// The result follows Parts() order whatever the order given, so that a
// part that feeds another (scaling before multi) always runs first.
func ParseParts(v string) ([]string, error) {
	if v == "all" {
		return Parts(), nil
	}
	want := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(Parts(), p) {
			return nil, fmt.Errorf("unknown part %q (known: %s)", p, strings.Join(Parts(), ","))
		}
		want[p] = true
	}
	var out []string
	for _, p := range Parts() {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// ParseCounts parses a comma-separated list of integers in [1, hi].
func ParseCounts(v string, hi int) ([]int, error) {
	var out []int
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		n, err := strconv.Atoi(item)
		if err != nil || n < 1 || n > hi {
			return nil, fmt.Errorf("%q: want integers from 1 to %d", item, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

func FormatCounts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// Bounds of the bench options. maxCount is beyond any kernel's traceable
// function count; maxCalls keeps one timed run within seconds under TCG.
const (
	MaxCount = 1 << 20
	MaxCalls = 100_000_000
)

// Where the bench profiles attach and detach (stress/profile): at the
// largest count of the scaling curve and of each multi link, at every
// count, or nowhere.
const (
	ProfileLargest = "largest"
	ProfileAll     = "all"
	ProfileOff     = "off"
)

// ParseProfile checks a profile option value.
func ParseProfile(v string) (string, error) {
	switch v {
	case ProfileLargest, ProfileAll, ProfileOff:
		return v, nil
	}
	return "", fmt.Errorf("want %q, %q or %q", ProfileLargest, ProfileAll, ProfileOff)
}
