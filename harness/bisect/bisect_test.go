package bisect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestEvidence(t *testing.T) {
	for _, tc := range []struct {
		ev       Evidence
		n        int
		passProb float64
	}{
		// Beta(3,1): E[(1-p)^n] = 6 / ((n+1)(n+2)(n+3)).
		{Evidence{Fail: 2}, 0, 1},
		{Evidence{Fail: 2}, 2, 6.0 / 60},
		{Evidence{Fail: 2}, 5, 6.0 / 336},
		// Beta(1,1), no failure seen: E[(1-p)^n] = 1/(n+1).
		{Evidence{}, 3, 1.0 / 4},
		// Beta(2,3): E[(1-p)^1] = 3/5.
		{Evidence{Fail: 1, Pass: 2}, 1, 3.0 / 5},
	} {
		if got := tc.ev.PassProb(tc.n); math.Abs(got-tc.passProb) > 1e-9 {
			t.Errorf("%+v.PassProb(%d) = %g, want %g", tc.ev, tc.n, got, tc.passProb)
		}
	}
	if got := (Evidence{Fail: 2}).RunsFor(0.02, 12); got != 5 {
		t.Errorf("RunsFor(0.02) after 2 of 2 = %d, want 5 (6/336 = 0.018)", got)
	}
	if got := (Evidence{Fail: 2, Pass: 30}).RunsFor(0.001, 12); got != 13 {
		t.Errorf("RunsFor past the limit = %d, want limit+1", got)
	}
	if got := (Evidence{Fail: 6, Pass: 2}).Rate(); got != 0.7 {
		t.Errorf("Rate = %g, want 0.7", got)
	}
}

func TestJudge(t *testing.T) {
	p := DefaultPolicy()
	known := Evidence{Fail: 2}
	for _, tc := range []struct {
		name string
		t    Tally
		ev   Evidence
		want Verdict // "" for another run
	}{
		{"one failure is not enough", Tally{Fail: 1}, known, ""},
		{"two failures", Tally{Fail: 2, Pass: 3}, known, Bad},
		{"too few passes for alpha", Tally{Pass: 3}, known, ""},
		{"enough passes", Tally{Pass: 5}, known, Good},
		{"the bad end is never good early", Tally{Pass: 5}, Evidence{}, ""},
		{"broken twice", Tally{Broken: 2, Pass: 1}, known, Skip},
		{"cap with no failure", Tally{Pass: 10, Other: 2}, Evidence{Fail: 2, Pass: 40}, Good},
		{"cap with one failure", Tally{Pass: 11, Fail: 1}, known, Unclear},
		{"cap with other failures only", Tally{Pass: 1, Other: 11}, known, Unclear},
		{"other failures are not passes", Tally{Pass: 1, Other: 6}, known, ""},
	} {
		v, done := p.judge(tc.t, tc.ev, 0.02)
		if !done {
			v = ""
		}
		if v != tc.want {
			t.Errorf("%s: %+v: %q, want %q", tc.name, tc.t, v, tc.want)
		}
	}
}

func TestKind(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"Oops: int3 in bpf_trampoline_92341858338", "Oops: int3 in do_syscall_64"},
		{"BUG: unable to handle page fault for address: ffffffffa0001000", "BUG: unable to handle page fault for address: ffffffffa0203000"},
		{"missed call: ops on fth_deliver_seq during detach of kprobe", "missed call: ops on fth_deliver_seq during detach of kprobe"},
	} {
		if Kind(tc.a) != Kind(tc.b) {
			t.Errorf("Kind(%q) = %q, Kind(%q) = %q: want one kind", tc.a, Kind(tc.a), tc.b, Kind(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"Oops: int3 in bpf_trampoline_1", "BUG: soft lockup in ftrace_modify_all_code"},
		{"WARNING in ftrace_bug", "Oops: int3 in ftrace_bug"},
	} {
		if Kind(tc.a) == Kind(tc.b) {
			t.Errorf("Kind(%q) = Kind(%q) = %q: want two kinds", tc.a, tc.b, Kind(tc.a))
		}
	}
}

// fake is a history whose revisions from culprit on fail a run with
// probability rate.
type fake struct {
	revs    []Revision
	culprit int
	rate    float64
	rng     *rand.Rand
	// broken revisions do not build; other ones also crash otherwise.
	broken, other map[int]bool
	// goodFails makes good revisions fail too (the ends are wrong).
	goodFails bool
	noRevert  bool
	runs      int
}

func newFake(n, culprit int, rate float64, seed uint64) *fake {
	f := &fake{culprit: culprit, rate: rate, rng: rand.New(rand.NewPCG(seed, 1)), broken: map[int]bool{}, other: map[int]bool{}}
	for i := range n {
		f.revs = append(f.revs, Revision{ID: fmt.Sprintf("%040x", i+1), Subject: fmt.Sprintf("commit %d", i)})
	}
	return f
}

func (f *fake) index(r Revision) int {
	for i, x := range f.revs {
		if x.ID == r.ID {
			return i
		}
	}
	panic(r.ID)
}

func (f *fake) Test(_ context.Context, t Target, _ int) (Run, error) {
	f.runs++
	i := f.index(t.Rev)
	bad := i >= f.culprit && (t.Revert == nil || f.index(*t.Revert) != f.culprit)
	switch {
	case f.broken[i]:
		return Run{Outcome: Broken, Reason: "kernel build: error"}, nil
	case f.other[i] && f.rng.Float64() < 0.5:
		return Run{Outcome: Fail, Title: "BUG: soft lockup in ftrace_modify_all_code"}, nil
	case (bad || f.goodFails) && f.rng.Float64() < f.rate:
		return Run{Outcome: Fail, Title: fmt.Sprintf("Oops: int3 in bpf_trampoline_%d", f.rng.Int64())}, nil
	}
	return Run{Outcome: Pass, GuestSeconds: 60}, nil
}

func (f *fake) CanRevert(context.Context, Revision, Revision) (bool, string, error) {
	if f.noRevert {
		return false, "conflict in kernel/bpf/trampoline.c", nil
	}
	return true, "", nil
}

func TestSearchDeterministic(t *testing.T) {
	f := newFake(16, 9, 1, 1)
	res, err := Search(context.Background(), f, f.revs, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Found || res.Culprit == nil || res.Culprit.ID != f.revs[9].ID {
		t.Fatalf("verdict %s, culprit %v (%s), want %s", res.Verdict, res.Culprit, res.Reason, f.revs[9])
	}
	if res.Confidence < 0.9 || !res.Revert {
		t.Errorf("confidence %.3f, revert %v", res.Confidence, res.Revert)
	}
	if res.Kind != "Oops: int3" {
		t.Errorf("kind %q", res.Kind)
	}
	roles := map[Role]int{}
	for _, s := range res.Steps {
		roles[s.Role]++
	}
	for _, r := range []Role{RoleBadEnd, RoleGoodEnd, RoleVerifyCulprit, RoleVerifyParent, RoleVerifyRevert} {
		if roles[r] != 1 {
			t.Errorf("%d %s steps, want 1", roles[r], r)
		}
	}
	if roles[RoleSearch] != 4 {
		t.Errorf("%d search steps over 16 revisions, want 4", roles[RoleSearch])
	}
	t.Logf("%d runs, confidence %.3f, rate %.2f", f.runs, res.Confidence, res.Rate)
}

func TestSearchEndsWrong(t *testing.T) {
	f := newFake(8, 4, 0, 1)
	res, err := Search(context.Background(), f, f.revs, DefaultPolicy(), nil)
	if err != nil || res.Verdict != EndsWrong || len(res.Steps) != 1 {
		t.Errorf("a bad end that never fails: %s (%s), %d steps, %v", res.Verdict, res.Reason, len(res.Steps), err)
	}
	f = newFake(8, 4, 1, 1)
	f.goodFails = true
	res, err = Search(context.Background(), f, f.revs, DefaultPolicy(), nil)
	if err != nil || res.Verdict != EndsWrong || len(res.Steps) != 2 {
		t.Errorf("a good end that fails: %s (%s), %d steps, %v", res.Verdict, res.Reason, len(res.Steps), err)
	}
}

// Revisions that do not build are stepped around; when the culprit's
// neighbour cannot be judged, the answer lists both, naming neither.
func TestSearchSkips(t *testing.T) {
	f := newFake(16, 9, 1, 1)
	f.broken[8] = true
	f.broken[5] = true
	res, err := Search(context.Background(), f, f.revs, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Inconclusive || len(res.Candidates) != 2 || res.Candidates[0].ID != f.revs[8].ID || res.Candidates[1].ID != f.revs[9].ID {
		t.Errorf("verdict %s (%s), candidates %v: want revisions 8 and 9", res.Verdict, res.Reason, res.Candidates)
	}
	f = newFake(16, 9, 1, 1)
	f.broken[5] = true
	f.broken[12] = true
	res, _ = Search(context.Background(), f, f.revs, DefaultPolicy(), nil)
	if res.Verdict != Found || res.Culprit.ID != f.revs[9].ID {
		t.Errorf("broken revisions away from the culprit: %s %v (%s)", res.Verdict, res.Culprit, res.Reason)
	}
}

// A revision that also crashes of another kind is not judged by it.
func TestSearchOtherKind(t *testing.T) {
	f := newFake(16, 9, 1, 3)
	f.other[4] = true
	res, err := Search(context.Background(), f, f.revs, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Found || res.Culprit.ID != f.revs[9].ID {
		t.Errorf("%s %v (%s)", res.Verdict, res.Culprit, res.Reason)
	}
	for _, s := range res.Steps {
		if s.Index == 4 && s.Tally().Other == 0 {
			t.Errorf("revision 4's soft lockups were not counted as other: %+v", s.Tally())
		}
	}
}

// With a flaky test, a named culprit is wrong at most as often as the
// threshold allows, over many bisections; the rest are right or
// inconclusive.
func TestSearchFlaky(t *testing.T) {
	for _, rate := range []float64{0.7, 0.4} {
		var right, wrong, inconclusive, runs int
		const n = 300
		for seed := range uint64(n) {
			f := newFake(16, 1+int(seed%14), rate, seed)
			res, err := Search(context.Background(), f, f.revs, DefaultPolicy(), nil)
			if err != nil {
				t.Fatal(err)
			}
			runs += f.runs
			switch {
			case res.Verdict == Found && res.Culprit.ID == f.revs[f.culprit].ID:
				right++
			case res.Verdict == Found:
				wrong++
			default:
				inconclusive++
			}
		}
		t.Logf("rate %.1f: %d right, %d wrong, %d inconclusive of %d; %.1f runs a bisection", rate, right, wrong, inconclusive, n, float64(runs)/n)
		if named := right + wrong; float64(wrong) > 0.1*float64(named) {
			t.Errorf("rate %.1f: %d of %d named culprits wrong, over the 10%% the threshold allows", rate, wrong, named)
		}
		if right < n/2 {
			t.Errorf("rate %.1f: only %d of %d right", rate, right, n)
		}
	}
}
