package bisect

import (
	"gonum.org/v1/gonum/stat/distuv"

	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestEvidence(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		// Beta(4, 1): the q-quantile is q^(1/4).
		{"lower after 3 of 3", Evidence{Fail: 3}.Lower(0.05), math.Pow(0.05, 0.25)},
		// Beta(2, 2) is symmetric: its median is 1/2.
		{"median after 1 of 2", Evidence{Fail: 1, Pass: 1}.Lower(0.5), 0.5},
		{"no failure, no bound", Evidence{Pass: 9}.Lower(0.05), 0},
		{"rate", Evidence{Fail: 6, Pass: 2}.Rate(), 0.7},
		{"good after 3 at 0.5", GoodConfidence(3, 0.5), 0.875},
		{"good without a reference", GoodConfidence(30, 0), 0},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s: %g, want %g", tc.name, tc.got, tc.want)
		}
	}
	// The bound is the quantile of the posterior: I_x(a, b) = q there.
	e := Evidence{Fail: 2, Pass: 5}
	if got := (distuv.Beta{Alpha: 3, Beta: 6}).CDF(e.Lower(0.05)); math.Abs(got-0.05) > 1e-9 {
		t.Errorf("Beta(3, 6) at its 5%% quantile: %g", got)
	}
	for _, tc := range []struct {
		conf, ref float64
		limit     int
		want      int
	}{
		{0.9, 0.1, 100, 22}, // 0.9^22 = 0.098
		{0.9, 1, 5, 1},
		{0.9, 0.5, 100, 4}, // 0.5^4 = 0.0625
		{0.99, 0.1, 12, 13},
		{0.9, 0, 12, 13},
	} {
		if got := PassesFor(tc.conf, tc.ref, tc.limit); got != tc.want {
			t.Errorf("PassesFor(%g, %g, %d) = %d, want %d", tc.conf, tc.ref, tc.limit, got, tc.want)
		}
	}
}

// A bad verdict is not certain: another bug may share the kind. More
// failures, and more good passes below, make it surer.
func TestBadConfidence(t *testing.T) {
	if c := BadConfidence(Evidence{Pass: 5}, 20); c != 0 {
		t.Errorf("no failure: %g", c)
	}
	one, two := BadConfidence(Evidence{Fail: 1}, 10), BadConfidence(Evidence{Fail: 2}, 10)
	if !(one < two && two < 1) {
		t.Errorf("1 failure %g, 2 failures %g: want rising, below 1", one, two)
	}
	if few, many := BadConfidence(Evidence{Fail: 1}, 2), BadConfidence(Evidence{Fail: 1}, 40); !(few < many) {
		t.Errorf("2 good passes below %g, 40 %g: want rising", few, many)
	}
	if c := BadConfidence(Evidence{Fail: 1}, 0); c < 0.9 || c > 0.99 {
		t.Errorf("one failure, nothing below: %g", c)
	}
}

func TestJudge(t *testing.T) {
	s := &searcher{p: DefaultPolicy()} // bad at 1, measured to 3, 2 to 16 runs
	below := rule{ref: 0.5, conf: 0.9} // 4 passes
	for _, tc := range []struct {
		name   string
		pooled Evidence
		t      Tally
		r      rule
		want   Verdict // "" for another run
	}{
		{"one failure makes bad", Evidence{Fail: 1}, Tally{Fail: 1}, below, Bad},
		{"a measured one runs on", Evidence{Fail: 1}, Tally{Fail: 1}, below.measured(), ""},
		{"until its third failure", Evidence{Fail: 3, Pass: 2}, Tally{Fail: 3, Pass: 2}, below.measured(), Bad},
		{"or the cap", Evidence{Fail: 1, Pass: 15}, Tally{Fail: 1, Pass: 15}, below.measured(), Bad},
		{"too few passes", Evidence{Pass: 3}, Tally{Pass: 3}, below, ""},
		{"enough passes", Evidence{Pass: 4}, Tally{Pass: 4}, below, Good},
		{"earlier passes count", Evidence{Pass: 4}, Tally{Pass: 2}, below, Good},
		{"but MinRuns are new", Evidence{Pass: 4}, Tally{Pass: 1}, below, ""},
		{"no reference, never good early", Evidence{Pass: 10}, Tally{Pass: 10}, rule{}, ""},
		{"broken twice", Evidence{Pass: 1}, Tally{Broken: 2, Pass: 1}, below, Skip},
		{"cap with no failure", Evidence{Pass: 14}, Tally{Pass: 14, Other: 2}, rule{ref: 0.01, conf: 0.9}, Good},
		{"cap with other failures only", Evidence{Pass: 1}, Tally{Pass: 1, Other: 15}, below, Unclear},
		{"other failures are not passes", Evidence{Pass: 1}, Tally{Pass: 1, Other: 6}, below, ""},
		{"again: an old failure is not enough", Evidence{Fail: 3, Pass: 1}, Tally{Pass: 1}, rule{again: true}, ""},
		{"again: a new one is", Evidence{Fail: 4}, Tally{Fail: 1}, rule{again: true, measure: true}, Bad},
		{"a longer cap", Evidence{Pass: 16}, Tally{Pass: 16}, rule{ref: 0.1, conf: 0.9, cap: 22}, ""},
		{"carried misses", Evidence{Pass: 2}, Tally{Pass: 2}, rule{ref: 0.5, conf: 0.9, carry: 0.4}, Good},
	} {
		v, done := s.judge(tc.pooled, tc.t, tc.r)
		if !done {
			v = ""
		}
		if v != tc.want {
			t.Errorf("%s: %+v %+v: %q, want %q", tc.name, tc.pooled, tc.t, v, tc.want)
		}
	}
}

func TestKind(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"Oops: int3 in bpf_trampoline_92341858338", "Oops: int3 in bpf_trampoline_6442"},
		{"BUG: unable to handle page fault for address: ffffffffa0001000", "BUG: unable to handle page fault for address: ffffffffa0203000"},
		{"missed call: ops on fth_deliver_seq during detach of kprobe", "missed call: ops on fth_deliver_seq during detach of kprobe"},
		{"WARNING in ftrace_bug+0x1c/0x40", "WARNING in ftrace_bug"},
		{"general protection fault in ftrace_find_rec_direct.isra.0", "general protection fault in ftrace_find_rec_direct"},
		{"BUG: soft lockup - CPU#3 stuck for 22s! in ftrace_modify_all_code", "BUG: soft lockup - CPU#0 stuck for 26s! in ftrace_modify_all_code"},
	} {
		if Kind(tc.a) != Kind(tc.b) {
			t.Errorf("Kind(%q) = %q, Kind(%q) = %q: want one kind", tc.a, Kind(tc.a), tc.b, Kind(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"Oops: int3 in bpf_trampoline_1", "BUG: soft lockup in ftrace_modify_all_code"},
		{"WARNING in ftrace_bug", "Oops: int3 in ftrace_bug"},
		// The location is part of the kind: two WARNINGs are two bugs.
		{"WARNING in ftrace_bug", "WARNING in __ftrace_hash_move"},
		{"Oops: int3 in bpf_trampoline_92341858338", "Oops: int3 in do_syscall_64"},
	} {
		if Kind(tc.a) == Kind(tc.b) {
			t.Errorf("Kind(%q) = Kind(%q) = %q: want two kinds", tc.a, tc.b, Kind(tc.a))
		}
	}
	if k := Kind("Oops: int3 in bpf_trampoline_10737479714"); k != "Oops: int3 in bpf_trampoline_N" {
		t.Errorf("kind %q", k)
	}
}

// simHistory is a simulated history of n revisions failing at rate from
// culprit on.
func simHistory(n, culprit int, rate float64, seed uint64) *Simulation {
	return NewSimulation(steps(n, culprit, rate, n, rate), map[int]bool{}, rand.New(rand.NewPCG(seed, 1)))
}

func index(sim *Simulation, r *Revision) int {
	if r == nil {
		return -1
	}
	return sim.index[r.ID]
}

func TestSearchDeterministic(t *testing.T) {
	sim := simHistory(16, 9, 1, 1)
	res, err := Search(context.Background(), sim, sim.Revs, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Found || index(sim, res.Culprit) != 9 || index(sim, res.Candidate) != 9 {
		t.Fatalf("verdict %s, culprit %v (%s), want revision 9", res.Verdict, res.Culprit, res.Reason)
	}
	if res.Confidence < 0.95 || !res.Revert {
		t.Errorf("confidence %.3f, revert %v", res.Confidence, res.Revert)
	}
	if res.Kind != "Oops: int3 in bpf_trampoline_N" {
		t.Errorf("kind %q", res.Kind)
	}
	roles := map[Role]int{}
	for _, s := range res.Steps {
		roles[s.Role]++
		if s.Verdict == Bad && (s.Confidence <= 0.9 || s.Confidence >= 1) {
			t.Errorf("%s step: bad with confidence %g, want a stated one below 1", s.Role, s.Confidence)
		}
	}
	for _, r := range []Role{RoleBadEnd, RoleGoodEnd, RoleVerifyCulprit, RoleVerifyParent, RoleVerifyRevert} {
		if roles[r] != 1 {
			t.Errorf("%d %s steps, want 1", roles[r], r)
		}
	}
	if roles[RoleSearch] != 4 {
		t.Errorf("%d search steps over 16 revisions, want 4", roles[RoleSearch])
	}
	if res.Evidence.Fail < DefaultPolicy().RateFailures || res.Parent.Fail != 0 || res.Reference != DefaultPolicy().MinRate {
		t.Errorf("candidate %+v, parent %+v, reference %g", res.Evidence, res.Parent, res.Reference)
	}
	t.Logf("%d runs, confidence %.3f", sim.Runs, res.Confidence)
}

func TestSearchEndsWrong(t *testing.T) {
	sim := simHistory(8, 4, 0, 1)
	res, err := Search(context.Background(), sim, sim.Revs, DefaultPolicy(), nil)
	if err != nil || res.Verdict != EndsWrong || len(res.Steps) != 1 || len(res.Steps[0].Runs) != DefaultPolicy().MaxRuns {
		t.Errorf("a bad end that never fails: %s (%s), %d steps, %v", res.Verdict, res.Reason, len(res.Steps), err)
	}
	sim = simHistory(8, 0, 1, 1)
	res, err = Search(context.Background(), sim, sim.Revs, DefaultPolicy(), nil)
	if err != nil || res.Verdict != EndsWrong || len(res.Steps) != 2 || res.Culprit != nil || res.Candidate != nil {
		t.Errorf("a good end that fails: %s (%s), %d steps, %v", res.Verdict, res.Reason, len(res.Steps), err)
	}
}

// Revisions that do not build are stepped around; when the culprit's
// neighbour cannot be judged, the answer lists both, naming neither.
func TestSearchSkips(t *testing.T) {
	sim := simHistory(16, 9, 1, 1)
	sim.Broken = map[int]bool{8: true, 5: true}
	res, err := Search(context.Background(), sim, sim.Revs, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Inconclusive || res.Culprit != nil || len(res.Candidates) != 2 || index(sim, &res.Candidates[0]) != 8 || index(sim, &res.Candidates[1]) != 9 {
		t.Errorf("verdict %s (%s), candidates %v: want revisions 8 and 9", res.Verdict, res.Reason, res.Candidates)
	}
	sim = simHistory(16, 9, 1, 1)
	sim.Broken = map[int]bool{5: true, 12: true}
	res, _ = Search(context.Background(), sim, sim.Revs, DefaultPolicy(), nil)
	if res.Verdict != Found || index(sim, res.Culprit) != 9 {
		t.Errorf("broken revisions away from the culprit: %s %v (%s)", res.Verdict, res.Culprit, res.Reason)
	}
}

// otherKind also crashes of another kind at one revision, every other
// run.
type otherKind struct {
	*Simulation
	at int
}

func (o otherKind) Test(ctx context.Context, t Target, n int) (Run, error) {
	if o.index[t.Rev.ID] == o.at && n%2 == 1 {
		o.Runs++
		return Run{Outcome: Fail, Title: "BUG: soft lockup in ftrace_modify_all_code"}, nil
	}
	return o.Simulation.Test(ctx, t, n)
}

// A revision that also crashes of another kind is not judged by it, and
// neither is one that crashes at another location.
func TestSearchOtherKind(t *testing.T) {
	sim := simHistory(16, 9, 1, 3)
	res, err := Search(context.Background(), otherKind{sim, 7}, sim.Revs, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Found || index(sim, res.Culprit) != 9 {
		t.Errorf("%s %v (%s)", res.Verdict, res.Culprit, res.Reason)
	}
	others := 0
	for _, s := range res.Steps {
		if s.Index == 7 {
			others += s.Tally().Other
		}
	}
	if others == 0 {
		t.Errorf("revision 7's soft lockups were not counted as other")
	}
}

// revertFails is a history whose culprit's revert does not make the bad
// end pass (a later commit brought the bug back).
type revertFails struct{ *Simulation }

func (r revertFails) Test(ctx context.Context, t Target, n int) (Run, error) {
	if t.Revert != nil {
		t.Revert = nil
	}
	return r.Simulation.Test(ctx, t, n)
}

// A candidate that verification does not confirm is not the culprit:
// bisect.json says which it was, as the candidate, and names no culprit.
func TestSearchUnverified(t *testing.T) {
	sim := simHistory(16, 5, 1, 1)
	res, err := Search(context.Background(), revertFails{sim}, sim.Revs, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Inconclusive || res.Culprit != nil || index(sim, res.Candidate) != 5 || !strings.Contains(res.Reason, "reverted did not pass") {
		t.Fatalf("verdict %s, culprit %v, candidate %v (%s)", res.Verdict, res.Culprit, res.Candidate, res.Reason)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if _, ok := back["culprit"]; ok {
		t.Errorf("bisect.json has a culprit for an unverified candidate: %s", b)
	}
	if c, _ := back["candidate"].(map[string]any); c["id"] != sim.Revs[5].ID {
		t.Errorf("bisect.json candidate %v, want %s", back["candidate"], sim.Revs[5].ID)
	}
}

// When a later commit raised the rate and the search took a bad revision
// for good, the parent's verification finds it bad and the search goes on
// below: the answer is the first bad revision or none, not the commit
// that raised the rate.
func TestSearchBacktracks(t *testing.T) {
	backtracked := 0
	for seed := range uint64(300) {
		sim := NewSimulation(steps(16, 5, 0.2, 10, 1), nil, rand.New(rand.NewPCG(seed, 2)))
		res, err := Search(context.Background(), sim, sim.Revs, DefaultPolicy(), nil)
		if err != nil {
			t.Fatal(err)
		}
		again := false
		for i, s := range res.Steps {
			if s.Role == RoleVerifyParent && s.Verdict == Bad && i+1 < len(res.Steps) {
				again = true
			}
		}
		if !again {
			continue
		}
		backtracked++
		if res.Verdict == Found && index(sim, res.Culprit) != 5 {
			t.Errorf("seed %d: named %v after going back, want revision 5 or none", seed, res.Culprit)
		}
	}
	if backtracked == 0 {
		t.Error("no bisection went on below a parent found bad")
	}
	t.Logf("%d of 300 went on below a bad parent", backtracked)
}
