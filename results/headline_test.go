package results

import (
	"testing"

	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/wire/event"
)

func TestHeadline(t *testing.T) {
	oops := Finding{Kind: console.KindOops, Title: "Oops: general protection fault in vfs_read"}
	warn := Finding{Kind: console.KindWarning, Title: "WARNING: in ftrace_bug"}
	known := Finding{Kind: console.KindReset, Title: "reset: the guest reset with no console report", Known: "rcu-read-unlock-special-fentry"}
	stall := Finding{Kind: console.KindRCUStall, Title: "INFO: rcu_tasks detected stalls", Induced: "the agent's spinners starved rcu_tasks"}
	harness := Finding{Kind: console.KindHarnessInduced, Title: "hang: the harness's spinners starved the guest"}
	pstore := Finding{Source: "pstore", Kind: console.KindPanic, Title: "kernel panic: sysrq triggered crash"}
	const exact = "oracle exact-count failed on __x64_sys_getppid: saw 0 of 1000 calls"
	// A report the race's injection titled (AttributeInjection) heads as
	// titled, behind an induced stall.
	injected := Result{
		Verdict:    Fail,
		Injections: []event.Injection{{Seq: 3, Symbol: "bpf_trampoline_10737479663+0x0", Addr: "0xffffffffa0800080", CPU: 1, Outcome: event.InjReleased}},
		Findings:   []Finding{stall, {Kind: console.KindOops, Title: "Oops: int3", Report: x86FreedTrampoline}},
	}
	AttributeInjection(&injected)
	for _, tc := range []struct {
		name         string
		r            Result
		includeKnown bool
		index        int
		title        string
		counted      bool
	}{
		{"pass", Result{Verdict: Pass}, false, -1, "", false},
		{"harness error", Result{Verdict: Error, Reason: "interrupted"}, false, -1, "interrupted", false},
		{"oracle failure without findings", Result{Verdict: Fail, Reason: exact}, false, -1, exact, true},
		{"one finding", Result{Verdict: Fail, Findings: []Finding{oops}}, false, 0, oops.Title, true},
		{"first of several", Result{Verdict: Fail, Findings: []Finding{warn, oops}}, false, 0, warn.Title, true},
		{"first of several, the other way", Result{Verdict: Fail, Findings: []Finding{oops, warn}}, false, 0, oops.Title, true},
		{"a record kept across a reboot", Result{Verdict: Fail, Findings: []Finding{pstore}}, false, 0, pstore.Title, true},
		{"known only", Result{Verdict: Pass, Reason: "known finding ended the run", Findings: []Finding{known}}, false, 0, "known rcu-read-unlock-special-fentry: " + known.Title, false},
		{"known only, included", Result{Verdict: Fail, Findings: []Finding{known}}, true, 0, known.Title, true},
		// A fail on a known finding (the run had --include-known), read without it.
		{"known only, failed by --include-known", Result{Verdict: Fail, Reason: known.Title, Findings: []Finding{known}}, false, 0, "known rcu-read-unlock-special-fentry: " + known.Title, false},
		{"known, then new", Result{Verdict: Fail, Findings: []Finding{known, oops}}, false, 1, oops.Title, true},
		{"known, then new, included", Result{Verdict: Fail, Findings: []Finding{known, oops}}, true, 0, known.Title, true},
		{"induced only", Result{Verdict: Error, Reason: stall.Induced, Findings: []Finding{stall}}, false, 0, stall.Title, false},
		{"harness-induced hang", Result{Verdict: Error, Reason: harness.Title, Findings: []Finding{harness}}, true, 0, harness.Title, false},
		{"induced, then a real oops", Result{Verdict: Fail, Findings: []Finding{stall, oops}}, false, 1, oops.Title, true},
		{"known, then induced", Result{Verdict: Error, Findings: []Finding{known, stall}}, false, 1, stall.Title, false},
		{"induced, then known, included", Result{Verdict: Fail, Findings: []Finding{stall, known}}, true, 1, known.Title, true},
		{"injected", injected, false, 1, "Oops: int3 in bpf_trampoline_10737479663", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.r.Headline(tc.includeKnown)
			if h.Index != tc.index || h.Title != tc.title || h.Counted != tc.counted {
				t.Fatalf("Headline(%v) = index %d %q counted %v; want index %d %q counted %v", tc.includeKnown, h.Index, h.Title, h.Counted, tc.index, tc.title, tc.counted)
			}
			if (h.Finding == nil) != (h.Index < 0) || (h.Finding != nil && h.Finding != &tc.r.Findings[h.Index]) {
				t.Errorf("Finding %p does not match index %d", h.Finding, h.Index)
			}
			if !tc.includeKnown && tc.r.Title() != h.Title {
				t.Errorf("Title() = %q, want the headline's %q", tc.r.Title(), h.Title)
			}
		})
	}
	if in := injected.Injections[0]; in.Title != injected.Title() {
		t.Errorf("the injection is titled %q, the cell %q: they must name the same report", in.Title, injected.Title())
	}
}
