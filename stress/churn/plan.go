package churn

import (
	"math/rand/v2"

	"github.com/ftrace-harness/fth/stress/oracle"
)

// Op is one kind of transition.
type Op int

// Transitions of a function's callsite.
const (
	// OpAttach attaches a new func-ip program of Step.Kind as Step.Item.
	OpAttach Op = iota
	// OpUpdate replaces the program of link Step.Item (BPF_LINK_UPDATE).
	OpUpdate
	// OpFtraceOn and OpFtraceOff add and remove the function to and from
	// the function tracer's filter.
	OpFtraceOn
	OpFtraceOff
	// OpKprobeOn and OpKprobeOff create-and-arm and disarm-and-delete a
	// kprobe at the function's entry.
	OpKprobeOn
	OpKprobeOff
	// OpDetach closes link Step.Item.
	OpDetach
)

// Step is one planned transition.
type Step struct {
	Op   Op
	Kind oracle.Kind // OpAttach, OpDetach, OpUpdate: the link's kind
	Item int         // OpAttach, OpDetach, OpUpdate: which link
}

// Name is the transition's name in Transition summaries.
func (s Step) Name() string {
	switch s.Op {
	case OpAttach:
		if s.Item == 0 {
			return "fentry_first"
		}
		return "add_" + s.Kind.String()
	case OpUpdate:
		return "link_update"
	case OpFtraceOn:
		return "ftrace_on"
	case OpFtraceOff:
		return "ftrace_off"
	case OpKprobeOn:
		return "kprobe_on"
	case OpKprobeOff:
		return "kprobe_off"
	case OpDetach:
		return "detach_" + s.Kind.String()
	}
	return "unknown"
}

// cycleStream separates the plan draws from the agent's other seeded
// streams.
const cycleStream = 0x66746863796c6500

// CycleRNG is the random source of one cycle of one function: it depends on
// the seed, the function's index in the hot set and the cycle number only,
// so that a function's sequence is the same however workers interleave.
func CycleRNG(seed int64, fn, cycle int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), cycleStream^uint64(fn)<<32^uint64(cycle)))
}

// Plan draws one cycle: none → one fentry → two or three fentry/fexit (the
// trampoline regenerated each time; with update, maybe one program
// replaced) → the function tracer added → maybe the tracer removed → a
// kprobe added → everything left removed in a random order. Keeping the
// tracer across the kprobe half the time puts all three kinds of user on
// one callsite at once, and lets the random removal order take the tracer
// off while the others stay.
func Plan(rng *rand.Rand, update bool) []Step {
	steps := []Step{{Op: OpAttach, Kind: oracle.FEntry, Item: 0}}
	kinds := []oracle.Kind{oracle.FEntry}
	extra := 1 + rng.IntN(2)
	for i := 1; i <= extra; i++ {
		k := oracle.FEntry
		if rng.IntN(2) == 0 {
			k = oracle.FExit
		}
		kinds = append(kinds, k)
		steps = append(steps, Step{Op: OpAttach, Kind: k, Item: i})
	}
	if update && rng.IntN(2) == 0 {
		i := rng.IntN(len(kinds))
		steps = append(steps, Step{Op: OpUpdate, Kind: kinds[i], Item: i})
	}
	steps = append(steps, Step{Op: OpFtraceOn})
	keepFtrace := rng.IntN(2) == 0
	if !keepFtrace {
		steps = append(steps, Step{Op: OpFtraceOff})
	}
	steps = append(steps, Step{Op: OpKprobeOn})

	var removal []Step
	for i, k := range kinds {
		removal = append(removal, Step{Op: OpDetach, Kind: k, Item: i})
	}
	if keepFtrace {
		removal = append(removal, Step{Op: OpFtraceOff})
	}
	removal = append(removal, Step{Op: OpKprobeOff})
	rng.Shuffle(len(removal), func(i, j int) { removal[i], removal[j] = removal[j], removal[i] })
	return append(steps, removal...)
}
