// Package bisect finds the first revision at which a test fails, when the
// test fails only some of the time.
//
// A kernel finding reproduces with some probability: a race that crashes
// every time under injection, a churn that catches a bug in two runs of
// three. A bisection that judges a revision by one run names a wrong commit
// whenever a bad revision happens to pass (syzbot's cause bisection was
// right for about a third of its bugs, mostly for that reason). Here every
// revision runs the test several times, adaptively, each revision's runs
// are kept as its own Evidence, and every verdict states how sure it is:
//
//   - bad: Policy.BadFailures failures of the kind bisected (Kind: the
//     title with its location); the revision then runs on to
//     Policy.RateFailures failures, to measure its rate. Its confidence
//     (BadConfidence) is the probability that the failures are not another
//     bug's that shares the kind, bounded by the passes of the revisions
//     below.
//   - good: no failure in enough passes that a bad revision would likely
//     have shown one. No rate is assumed for the whole history (a later
//     commit may make the bug likelier): a revision is judged against its
//     nearest known-bad descendant, by a lower credible bound of that
//     revision's own rate over all its runs (Evidence.Lower), and its
//     confidence is one minus the probability that a bad revision failing
//     at that bound passes every run (GoodConfidence).
//
// The answer rests on the candidate being bad and the first bad one: if
// it is not, its parent is bad, and so is the bad end with the candidate
// reverted. Verification runs the candidate again, then its parent and
// the revert, both judged against the lower of the candidate's bound and
// Policy.MinRate (a bad parent may fail less often than a candidate that
// raised the rate); a wrong answer survives only if both pass every run.
// A parent that fails sends the search on below it. The answer's
// confidence is the candidate's bad verdict's times one minus that
// survival; below Policy.Threshold the result is inconclusive, never a
// culprit. Evaluate checks these numbers against simulated histories;
// docs/bisect.md has the table and the reasoning.
package bisect

import (
	"context"
	"fmt"
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
	// Confidence is the probability that the verdict is right:
	// BadConfidence for bad, GoodConfidence for good (against Reference),
	// 0 otherwise. It is the revision's, from all its runs so far.
	Confidence float64 `json:"confidence"`
	// Reference is the failure rate a good verdict was judged against:
	// the lower credible bound of the rate of the revision's nearest
	// known-bad descendant (Evidence.Lower).
	Reference float64 `json:"reference,omitempty"`
	// Evidence is the revision's runs so far, this step's and earlier
	// steps' of the same target.
	Evidence Evidence `json:"evidence"`
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
	// MinRuns is the fewest passes that make a revision good, and the
	// fewest new passes its parent's verification takes.
	MinRuns int `json:"min_runs"`
	// MaxRuns caps the runs of one step.
	MaxRuns int `json:"max_runs"`
	// BadFailures failures of the kind bisected make a revision bad.
	BadFailures int `json:"bad_failures"`
	// RateFailures is how many failures a bad revision runs to (within
	// MaxRuns) so that the revisions below it, judged against its rate,
	// need few passes.
	RateFailures int `json:"rate_failures"`
	// MaxBroken broken runs make a revision a skip.
	MaxBroken int `json:"max_broken"`
	// Threshold is the least confidence a culprit is named with, and the
	// confidence a good verdict asks.
	Threshold float64 `json:"threshold"`
	// Credible is the posterior probability that a bad revision's failure
	// rate is below the bound the revisions under it are judged against
	// (Evidence.Lower).
	Credible float64 `json:"credible"`
	// MinRate is the least failure rate of a bad revision the answer
	// guards against: the candidate's parent is judged against the lower
	// of it and the candidate's bound, since a bad parent may fail less
	// often than the candidate (the candidate raised the rate).
	MinRate float64 `json:"min_rate"`
}

// DefaultPolicy: one failure of the kind for bad, run on to three to
// measure the rate, at least two passes for good, at most 16 runs a step,
// a culprit at 0.9, rates bounded at their 5% quantile. syzbot suppresses
// its results below 0.66; a bisection here controls its reruns, so it asks
// more.
func DefaultPolicy() Policy {
	return Policy{MinRuns: 2, MaxRuns: 16, BadFailures: 1, RateFailures: 3, MaxBroken: 2, Threshold: 0.9, Credible: 0.05, MinRate: 0.1}
}

// Check says what is wrong with p, naming the flag to fix.
func (p Policy) Check() error {
	switch {
	case p.BadFailures < 1:
		return fmt.Errorf("--bad-failures %d: want at least 1", p.BadFailures)
	case p.RateFailures < p.BadFailures:
		return fmt.Errorf("--rate-failures %d: want at least --bad-failures (%d)", p.RateFailures, p.BadFailures)
	case p.MinRuns < 1:
		return fmt.Errorf("--min-runs %d: want at least 1", p.MinRuns)
	case p.MaxRuns < p.MinRuns || p.MaxRuns < p.BadFailures:
		return fmt.Errorf("--max-runs %d: want at least --min-runs (%d) and --bad-failures (%d)", p.MaxRuns, p.MinRuns, p.BadFailures)
	case p.MaxBroken < 1:
		return fmt.Errorf("--max-broken %d: want at least 1", p.MaxBroken)
	case p.Threshold <= 0 || p.Threshold >= 1:
		return fmt.Errorf("--threshold %g: want a probability between 0 and 1, exclusive", p.Threshold)
	case p.Credible <= 0 || p.Credible >= 0.5:
		return fmt.Errorf("--credible %g: want a probability between 0 and 0.5, exclusive", p.Credible)
	case p.MinRate <= 0 || p.MinRate > 1:
		return fmt.Errorf("--min-rate %g: want a probability above 0, at most 1", p.MinRate)
	}
	return nil
}

// Kind normalisation: what varies between two reports of one bug. In the
// title group, numbers (an address, a CPU, a duration); in the location, the
// offset (+0x1c/0x40), a compiler clone's suffix (.isra.0, .constprop.0,
// .cold) and a trailing number (a freed trampoline's key,
// bpf_trampoline_92341858338).
var (
	kindNumRe    = regexp.MustCompile(`\b((0x)?[0-9a-f]*[0-9][0-9a-f]*|[0-9]+(s|ms|us|ns))\b`)
	kindOffRe    = regexp.MustCompile(`\+0x[0-9a-f]+(/0x[0-9a-f]+)?$`)
	kindCloneRe  = regexp.MustCompile(`(\.(isra|constprop|part|cold|lto_priv|llvm|localalias)(\.[0-9]+)*)+$`)
	kindSuffixRe = regexp.MustCompile(`_[0-9]+$`)
)

// Kind is the failure kind of a title: what "the same failure" means to a
// bisection. It is the title group (what went wrong: "WARNING", "Oops:
// int3", "BUG: soft lockup") with its location (the function after the
// last " in "), as syzbot tells bugs apart: "WARNING in ftrace_bug" and
// "WARNING in __ftrace_hash_move" are two bugs, and a revision that shows
// the second is not bad for the first. What varies between two reports of
// one bug is normalised away: numbers in the group, and in the location
// its offset, a compiler clone's suffix and a trailing number, so "Oops:
// int3 in bpf_trampoline_92341858338" and "Oops: int3 in
// bpf_trampoline_6442" are one kind. A failure of another kind counts
// neither way (Other).
func Kind(title string) string {
	group, loc := strings.TrimSpace(title), ""
	if i := strings.LastIndex(group, " in "); i >= 0 {
		group, loc = group[:i], strings.TrimSpace(group[i+len(" in "):])
	}
	group = strings.TrimSpace(kindNumRe.ReplaceAllString(group, "N"))
	if loc == "" {
		return group
	}
	if f := strings.Fields(loc); len(f) > 0 {
		loc = f[0]
	}
	loc = kindOffRe.ReplaceAllString(loc, "")
	loc = kindCloneRe.ReplaceAllString(loc, "")
	loc = kindSuffixRe.ReplaceAllString(loc, "_N")
	return group + " in " + loc
}
