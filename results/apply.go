package results

import (
	"fmt"

	"github.com/ftrace-harness/fth/wire/event"
)

// Apply folds the state an agent event carries into r: the hello's seed
// and preemption model, inventory, phases, transitions, oracles, features,
// liveness, the bench's measurements and the agent's own verdict. Events
// that are only a stream (logs, progress, operations) leave r alone. The
// QEMU cell and the SSH soak share it, so a board's result reads like a
// VM's.
func Apply(r *Result, ev event.Event) {
	switch ev.Kind {
	case event.KindHello:
		r.PreemptModel = ev.Hello.PreemptModel
		r.Seed = ev.Hello.Args["seed"]
	case event.KindInventory:
		r.Inventory = ev.Inventory
	case event.KindPhase:
		if r.Phases == nil {
			r.Phases = map[string]*event.Phase{}
		}
		r.Phases[ev.Phase.Name] = ev.Phase
	case event.KindTransition:
		if r.Transitions == nil {
			r.Transitions = map[string]*event.Phase{}
		}
		r.Transitions[ev.Transition.Name] = ev.Transition
	case event.KindOracle:
		r.Oracles = AddOracle(r.Oracles, *ev.Oracle)
	case event.KindFeature:
		r.Features = append(r.Features, *ev.Feature)
	case event.KindPreempt:
		r.Preempt = ev.Preempt
	case event.KindHotSet:
		r.HotSet = ev.HotSet
	case event.KindBench:
		r.Bench = ev.Bench
	case event.KindDelivery:
		r.Delivery = ev.Delivery
	case event.KindInjection:
		r.Injections = AddInjection(r.Injections, *ev.Injection)
	case event.KindRaceWindow:
		r.Windows = append(r.Windows, *ev.RaceWindow)
	case event.KindImage:
		r.images = append(r.images, *ev.Image)
	case event.KindLiveness:
		r.Liveness = mergeLiveness(r.Liveness, ev.Liveness)
	case event.KindStage:
		r.startStage(ev.Time, *ev.Stage)
	case event.KindDone:
		r.endStage(ev.Time)
		ok := ev.Done.OK
		r.AgentOK, r.AgentReason, r.AgentUnjudged = &ok, ev.Done.Reason, ev.Done.Unjudged
	}
}

// AddInjection keeps the latest report of each injection (by Seq), in
// order.
func AddInjection(list []event.Injection, in event.Injection) []event.Injection {
	for i := range list {
		if list[i].Seq == in.Seq {
			list[i] = in
			return list
		}
	}
	return append(list, in)
}

// AddOracle keeps summaries (no Function, or a Checks count) and the
// calibration always, and failed checks up to MaxOracleFailures; passing
// single checks are in events.jsonl only.
func AddOracle(list []event.Oracle, o event.Oracle) []event.Oracle {
	summary := o.Function == "" || o.Checks > 0 || o.Skipped != ""
	if summary || o.Name == event.OracleCalibration {
		return append(list, o)
	}
	if o.OK {
		return list
	}
	failed := 0
	for _, x := range list {
		if !x.OK && x.Checks == 0 && x.Skipped == "" {
			failed++
		}
	}
	if failed >= MaxOracleFailures {
		return list
	}
	return append(list, o)
}

// FailedOracle describes the first failed oracle check or summary in os:
// the host fails a cell on it even if the agent said all was well.
func FailedOracle(os []event.Oracle) (string, bool) {
	o, ok := FirstFailedOracle(os)
	if !ok {
		return "", false
	}
	switch {
	case o.Title != "" && o.Checks == 0:
		return o.Title, true
	case o.Function != "" && o.Checks == 0 && o.Name == event.OracleExact:
		return fmt.Sprintf("oracle %s failed on %s: expected %d hits, got %d", o.Name, o.Function, o.Expected, o.Got), true
	case o.Function != "" && o.Checks == 0:
		msg := fmt.Sprintf("oracle %s failed on %s: expected %#x, got %#x", o.Name, o.Function, o.Expected, o.Got)
		if o.Msg != "" {
			msg += " " + o.Msg
		}
		return msg, true
	default:
		return fmt.Sprintf("oracle %s: %d of %d checks failed", o.Name, o.Failures, o.Checks), true
	}
}

// FirstFailedOracle is the first check in os that ran and failed: the
// one FailedOracle titles.
func FirstFailedOracle(os []event.Oracle) (event.Oracle, bool) {
	for _, o := range os {
		if !o.OK && o.Skipped == "" {
			return o, true
		}
	}
	return event.Oracle{}, false
}

func mergeLiveness(prev, cur *event.Liveness) *event.Liveness {
	if prev == nil {
		c := *cur
		return &c
	}
	out := *prev
	out.Threads = cur.Threads
	out.Iterations += cur.Iterations
	out.Stalled = append(out.Stalled, cur.Stalled...)
	return &out
}
