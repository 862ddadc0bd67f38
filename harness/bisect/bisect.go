// Package bisect finds the first revision at which a test fails, when the
// test fails only some of the time.
//
// A kernel finding reproduces with some probability: a race that crashes
// every time under injection, a churn that catches a bug in two runs of
// three. A bisection that judges a revision by one run names a wrong commit
// whenever a bad revision happens to pass (syzbot's cause bisection was
// right for about a third of its bugs, mostly for that reason). Here every
// revision runs the test several times, adaptively, and every verdict
// carries the probability that it is wrong:
//
//   - bad: Policy.BadFailures failures of the kind bisected. A failure is
//     never taken for chance: the harness counts only kernel-side failures
//     (results.Result.Headline), so a correct kernel does not produce them,
//     and the good end must show none.
//   - good: no failure in enough passes that a bad revision would likely
//     have shown one. How likely is the question: a bad revision's failure
//     probability p is estimated from every revision judged bad (pooled
//     failures and passes; with a uniform prior, p ~ Beta(failures+1,
//     passes+1)), and a good verdict after n passes is wrong with
//     probability E[(1-p)^n] under that estimate (Evidence.PassProb). The
//     runs it takes are chosen so that the product over every good verdict
//     stays above Policy.Threshold.
//
// The result's confidence is the product over the good verdicts (the good
// end's, the search's and the culprit's parent's again). Below the
// threshold the result is inconclusive, never a culprit.
package bisect

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Revision is one point of the history: a commit, or a packaged kernel
// series.
type Revision struct {
	ID      string `json:"id"`
	Subject string `json:"subject,omitempty"`
}

// Short is the revision's name in logs: a commit's first 12 hex digits.
func (r Revision) Short() string {
	if len(r.ID) == 40 {
		return r.ID[:12]
	}
	return r.ID
}

func (r Revision) String() string {
	if r.Subject == "" {
		return r.Short()
	}
	return fmt.Sprintf("%s (%q)", r.Short(), r.Subject)
}

// Outcome is what one run of the test showed.
type Outcome string

const (
	// Pass: the cell passed.
	Pass Outcome = "pass"
	// Fail: a kernel-side failure of the kind bisected (Kind).
	Fail Outcome = "fail"
	// Other: a kernel-side failure of another kind. It counts neither
	// way: the kernel may have died of it before the bisected bug could
	// show.
	Other Outcome = "other"
	// Broken: the revision did not build or boot, or the harness failed.
	Broken Outcome = "broken"
)

// Run is one run of the test on a revision.
type Run struct {
	Outcome Outcome `json:"outcome"`
	// Title is the failure's title (the cell's headline), Reason why a
	// run is broken.
	Title  string `json:"title,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Cell is the run's result directory.
	Cell string `json:"cell,omitempty"`
	// Built says a kernel was compiled for the run (not taken from the
	// cache); BuildSeconds is what the kernel and image took either way.
	Built        bool    `json:"built,omitempty"`
	BuildSeconds float64 `json:"build_seconds"`
	GuestSeconds float64 `json:"guest_seconds"`
}

// Target is what one test runs: a revision, or (Revert) the revision with
// the culprit reverted.
type Target struct {
	Rev    Revision  `json:"rev"`
	Revert *Revision `json:"revert,omitempty"`
}

// Tester runs the test. An error ends the bisection (the context was
// cancelled, the machine failed): a revision that does not build is a run
// with Outcome Broken.
type Tester interface {
	Test(ctx context.Context, t Target, run int) (Run, error)
	// CanRevert says whether culprit reverts cleanly on bad, and if not,
	// why.
	CanRevert(ctx context.Context, bad, culprit Revision) (bool, string, error)
}

// Role is why a revision is tested.
type Role string

const (
	RoleBadEnd        Role = "bad-end"
	RoleGoodEnd       Role = "good-end"
	RoleSearch        Role = "search"
	RoleVerifyCulprit Role = "verify-culprit"
	RoleVerifyParent  Role = "verify-parent"
	RoleVerifyRevert  Role = "verify-revert"
)

// Verdict is a step's judgment of its revision.
type Verdict string

const (
	Good Verdict = "good"
	Bad  Verdict = "bad"
	// Skip: the revision does not build or boot (git bisect skip).
	Skip Verdict = "skip"
	// Unclear: the run cap came with failures too few to call it bad, or
	// with other failures only.
	Unclear Verdict = "unclear"
)

// Step is one revision's runs and verdict.
type Step struct {
	Role   Role   `json:"role"`
	Target Target `json:"target"`
	// Index is the revision's place in the history (0: the good end).
	Index   int     `json:"index"`
	Runs    []Run   `json:"runs"`
	Verdict Verdict `json:"verdict"`
	// Confidence is the probability that the verdict is right: 1 for bad
	// (see the package doc), Evidence.GoodConfidence for good, 0
	// otherwise.
	Confidence float64 `json:"confidence"`
}

// Tally counts a step's runs by outcome.
type Tally struct{ Pass, Fail, Other, Broken int }

// Runs is how many runs there were.
func (t Tally) Runs() int { return t.Pass + t.Fail + t.Other + t.Broken }

// Tally counts s's runs.
func (s Step) Tally() Tally {
	var t Tally
	for _, r := range s.Runs {
		switch r.Outcome {
		case Pass:
			t.Pass++
		case Fail:
			t.Fail++
		case Other:
			t.Other++
		default:
			t.Broken++
		}
	}
	return t
}

// Policy is how many runs a revision gets and what a culprit needs.
type Policy struct {
	// MinRuns is the fewest passes that make a revision good.
	MinRuns int `json:"min_runs"`
	// MaxRuns caps the runs of one revision.
	MaxRuns int `json:"max_runs"`
	// BadFailures failures of the kind bisected make a revision bad.
	BadFailures int `json:"bad_failures"`
	// MaxBroken broken runs make a revision a skip.
	MaxBroken int `json:"max_broken"`
	// Threshold is the least confidence a culprit is named with.
	Threshold float64 `json:"threshold"`
}

// DefaultPolicy: two failures for bad, at least two passes for good, at
// most 12 runs a revision, a culprit at 0.9. syzbot suppresses its results
// below 0.66; a bisection here controls its reruns, so it asks more.
func DefaultPolicy() Policy {
	return Policy{MinRuns: 2, MaxRuns: 12, BadFailures: 2, MaxBroken: 2, Threshold: 0.9}
}

// Check says what is wrong with p, naming the flag to fix.
func (p Policy) Check() error {
	switch {
	case p.BadFailures < 1:
		return fmt.Errorf("--bad-failures %d: want at least 1", p.BadFailures)
	case p.MinRuns < 1:
		return fmt.Errorf("--min-runs %d: want at least 1", p.MinRuns)
	case p.MaxRuns < p.MinRuns || p.MaxRuns < p.BadFailures:
		return fmt.Errorf("--max-runs %d: want at least --min-runs (%d) and --bad-failures (%d)", p.MaxRuns, p.MinRuns, p.BadFailures)
	case p.MaxBroken < 1:
		return fmt.Errorf("--max-broken %d: want at least 1", p.MaxBroken)
	case p.Threshold <= 0 || p.Threshold >= 1:
		return fmt.Errorf("--threshold %g: want a probability between 0 and 1, exclusive", p.Threshold)
	}
	return nil
}

// Evidence is what the revisions judged bad showed: their failures and
// passes, pooled. A bad revision's failure probability p is not known,
// only this; with a uniform prior its posterior is Beta(Fail+1, Pass+1)
// (sampling each revision until its BadFailures-th failure does not change
// the likelihood, so not the posterior either).
type Evidence struct{ Fail, Pass int }

// Known says there is any evidence yet.
func (e Evidence) Known() bool { return e.Fail+e.Pass > 0 }

// Rate is the posterior mean of p.
func (e Evidence) Rate() float64 {
	return float64(e.Fail+1) / float64(e.Fail+e.Pass+2)
}

// PassProb is the probability that a bad revision passes n runs in a
// row: E[(1-p)^n] under the posterior, B(a, b+n) / B(a, b).
func (e Evidence) PassProb(n int) float64 {
	a, b := float64(e.Fail+1), float64(e.Pass+1)
	return math.Exp(lbeta(a, b+float64(n)) - lbeta(a, b))
}

// GoodConfidence is the probability that a revision that passed n runs
// (and failed none) is not a bad one that happened to pass them.
func (e Evidence) GoodConfidence(n int) float64 { return 1 - e.PassProb(n) }

// RunsFor is the fewest passes after which a good verdict is wrong with
// probability at most alpha, or limit+1 if limit passes are not enough.
func (e Evidence) RunsFor(alpha float64, limit int) int {
	for n := 1; n <= limit; n++ {
		if e.PassProb(n) <= alpha {
			return n
		}
	}
	return limit + 1
}

func lbeta(a, b float64) float64 {
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	return la + lb - lab
}

// judge decides a step from its runs, or says it needs another run.
// alpha is the most a good verdict may be wrong by; without evidence yet
// (the bad end) a step is never judged good before the cap.
func (p Policy) judge(t Tally, ev Evidence, alpha float64) (Verdict, bool) {
	need := math.MaxInt
	if ev.Known() {
		need = max(p.MinRuns, ev.RunsFor(alpha, p.MaxRuns))
	}
	switch {
	case t.Fail >= p.BadFailures:
		return Bad, true
	case t.Broken >= p.MaxBroken:
		return Skip, true
	case t.Fail == 0 && t.Pass >= need:
		return Good, true
	case t.Runs() >= p.MaxRuns:
		if t.Fail == 0 && t.Pass >= p.MinRuns {
			// Fewer passes than alpha asks: a good verdict whose
			// lower confidence the result's product carries.
			return Good, true
		}
		return Unclear, true
	}
	return "", false
}

// Gather pools the evidence of the steps judged bad.
func Gather(steps []Step) Evidence {
	var e Evidence
	for _, s := range steps {
		if s.Verdict == Bad {
			t := s.Tally()
			e.Fail += t.Fail
			e.Pass += t.Pass
		}
	}
	return e
}

// kindRe finds what varies between two reports of one bug: a location
// after " in " (the function, which inlining and layout move between
// revisions) and numbers (a trampoline's key, an address, a count).
var (
	kindLocRe = regexp.MustCompile(` in \S+.*$`)
	kindNumRe = regexp.MustCompile(`\b(0x)?[0-9a-f]*[0-9][0-9a-f]*\b`)
)

// Kind is the failure kind of a title: what "the same failure" means to a
// bisection. Two titles of one kind differ only in the function they name
// and in numbers: "Oops: int3 in bpf_trampoline_92341858338" and "Oops:
// int3 in do_syscall_64" are one kind. A failure of another kind at some
// revision is another bug until shown otherwise, and counts neither way
// (Other): the search then says inconclusive rather than chase it.
func Kind(title string) string {
	k := kindLocRe.ReplaceAllString(title, "")
	return strings.TrimSpace(kindNumRe.ReplaceAllString(k, "N"))
}
