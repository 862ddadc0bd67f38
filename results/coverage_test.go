package results

import (
	"testing"

	"github.com/ftrace-harness/fth/wire/event"
)

func TestRaceCoverage(t *testing.T) {
	win := event.RaceWindow{Target: "trampoline", Actions: []string{"replace"},
		Insns: []event.WindowInsn{{Off: 0, Len: 4, Asm: "endbr64"}, {Off: 4, Len: 1, Asm: "push %rbp"}, {Off: 5, Len: 3, Asm: "mov %rsp,%rbp"}}}
	inj := func(off int, outcome string) event.Injection {
		return event.Injection{Target: "trampoline", Offset: off, Action: "replace", Outcome: outcome}
	}
	for _, tc := range []struct {
		name string
		inj  []event.Injection
		want string
	}{
		{"nothing injected", nil, "trampoline: 0 of 3 instruction×action points explored (3 instructions × 1 action)"},
		{"every point survived", []event.Injection{inj(0, event.InjSurvived), inj(4, event.InjSurvived), inj(5, event.InjSurvived)},
			"trampoline: 3 of 3 instruction×action points explored (3 instructions × 1 action), 3 survived"},
		{"a point twice counts once, worst outcome kept", []event.Injection{inj(0, event.InjSurvived), inj(0, event.InjFreedUnderTask), inj(4, event.InjSurvived)},
			"trampoline: 2 of 3 instruction×action points explored (3 instructions × 1 action), 1 survived, 1 freed-under-task"},
		// The agent tries a not-preempted point again: a later survival
		// explored it.
		{"not preempted, then survived", []event.Injection{inj(0, event.InjNotPreempted), inj(0, event.InjSurvived), inj(4, event.InjSurvived)},
			"trampoline: 2 of 3 instruction×action points explored (3 instructions × 1 action), 2 survived"},
		{"never preempted is not explored", []event.Injection{inj(0, event.InjNotPreempted), inj(0, event.InjNotPreempted), inj(4, event.InjSurvived)},
			"trampoline: 1 of 3 instruction×action points explored (3 instructions × 1 action), 1 survived, 1 not-preempted"},
		{"the kernel died after a release", []event.Injection{inj(0, event.InjSurvived), inj(4, event.InjCrashed)},
			"trampoline: 2 of 3 instruction×action points explored (3 instructions × 1 action), 1 survived, 1 crashed"},
		// The agent stopped with the task let go and not judged: not a
		// crash.
		{"released, never judged", []event.Injection{inj(0, event.InjSurvived), inj(4, event.InjReleased)},
			"trampoline: 2 of 3 instruction×action points explored (3 instructions × 1 action), 1 survived, 1 released"},
		{"a miss explores nothing", []event.Injection{inj(0, event.InjMissed), inj(4, event.InjFreedUnderTask)},
			"trampoline: 1 of 3 instruction×action points explored (3 instructions × 1 action), 1 freed-under-task, 1 injection(s) missed"},
		{"another target's injections", []event.Injection{{Target: "opstramp", Offset: 0, Action: "tracer-off", Outcome: event.InjSurvived}},
			"trampoline: 0 of 3 instruction×action points explored (3 instructions × 1 action)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Windows: []event.RaceWindow{win}, Injections: tc.inj}
			cov := r.RaceCoverage()
			if len(cov) != 1 || cov[0].String() != tc.want {
				t.Errorf("coverage %v\nwant %q", cov, tc.want)
			}
		})
	}
	two := Result{Windows: []event.RaceWindow{{Target: "trampoline", Actions: []string{"replace", "detach"}, Insns: win.Insns}},
		Injections: []event.Injection{inj(0, event.InjSurvived), {Target: "trampoline", Offset: 0, Action: "detach", Outcome: event.InjSurvived}}}
	if got, want := two.RaceCoverage()[0].String(), "trampoline: 2 of 6 instruction×action points explored (3 instructions × 2 actions), 2 survived"; got != want {
		t.Errorf("two actions: %q, want %q", got, want)
	}
	one := Result{Windows: []event.RaceWindow{{Target: "callsite", Actions: []string{"enable"}, Insns: win.Insns[:1]}},
		Injections: []event.Injection{{Target: "callsite", Offset: 0, Action: "enable", Outcome: event.InjSurvived}}}
	if got, want := one.RaceCoverage()[0].String(), "callsite: 1 of 1 instruction×action points explored (1 instruction × 1 action), 1 survived"; got != want {
		t.Errorf("one place: %q, want %q", got, want)
	}
	r := Result{Windows: []event.RaceWindow{{Target: "opstramp", Unreachable: "not decoded"}}}
	if got := r.RaceCoverage()[0].String(); got != "opstramp: unreachable: not decoded" {
		t.Errorf("an undecoded window: %q", got)
	}
}
