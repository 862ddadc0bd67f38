package bisect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Result verdicts.
const (
	// Found: a culprit, verified, at least Policy.Threshold confident.
	Found = "culprit"
	// Inconclusive: no culprit named; Reason says why.
	Inconclusive = "inconclusive"
	// EndsWrong: the ends did not behave as claimed (the bad one did not
	// fail, or the good one did); nothing was searched.
	EndsWrong = "ends-wrong"
)

// Result is a bisection's outcome.
type Result struct {
	Verdict string    `json:"verdict"`
	Culprit *Revision `json:"culprit,omitempty"`
	// Candidates are the revisions the first bad one is among when skips
	// (or unclear steps) left more than one.
	Candidates []Revision `json:"candidates,omitempty"`
	// Confidence is the product of the good verdicts' confidences.
	Confidence float64 `json:"confidence"`
	// Rate is the estimated probability that a bad revision fails a run
	// (Evidence.Rate), from Evidence.
	Rate     float64  `json:"rate"`
	Evidence Evidence `json:"evidence"`
	// Kind is the failure kind bisected (see Kind), FirstTitle the bad
	// end's first failure.
	Kind       string `json:"kind"`
	FirstTitle string `json:"first_title"`
	Reason     string `json:"reason,omitempty"`
	// Revert says whether the culprit reverted cleanly on the bad end
	// (and so whether verify-revert ran), and if not, why.
	Revert    bool   `json:"revert"`
	RevertWhy string `json:"revert_why,omitempty"`
	Revisions int    `json:"revisions"`
	Steps     []Step `json:"steps"`
	Policy    Policy `json:"policy"`
}

// Cost sums the steps' runs: kernels compiled, build and guest seconds.
func (r Result) Cost() (builds, runs int, buildSeconds, guestSeconds float64) {
	for _, s := range r.Steps {
		for _, run := range s.Runs {
			runs++
			if run.Built {
				builds++
			}
			buildSeconds += run.BuildSeconds
			guestSeconds += run.GuestSeconds
		}
	}
	return
}

// Search bisects revs, from revs[0] (claimed good) to revs[len-1] (claimed
// bad), with t. step is called after each step with the result so far
// (the log, and a record an interruption keeps); the result
// is complete whatever the verdict. The error is t's (the bisection could
// not go on); the result holds the steps until then.
func Search(ctx context.Context, t Tester, revs []Revision, p Policy, step func(Result)) (Result, error) {
	res := Result{Revisions: len(revs), Policy: p, Confidence: 0}
	if err := p.Check(); err != nil {
		return res, err
	}
	if len(revs) < 2 {
		return res, errors.New("bisect: want a good and a bad revision")
	}
	s := &searcher{t: t, p: p, res: &res, onStep: step}
	// The good verdicts the result multiplies: the good end, one per
	// halving (about half of them good, counted all for safety), the
	// culprit's parent again.
	judgments := math.Ceil(math.Log2(float64(len(revs)))) + 2
	s.alpha = 1 - math.Pow(p.Threshold, 1/judgments)

	last := len(revs) - 1
	bad, err := s.test(ctx, RoleBadEnd, last, Target{Rev: revs[last]})
	if err != nil {
		return res, err
	}
	if bad.Verdict != Bad {
		tl := bad.Tally()
		res.Verdict = EndsWrong
		res.Reason = fmt.Sprintf("the bad revision %s did not fail as claimed: %d of %d runs failed (%d needed), %d passed, %d failed otherwise, %d broken", revs[last], tl.Fail, tl.Runs(), p.BadFailures, tl.Pass, tl.Other, tl.Broken)
		return res, nil
	}
	good, err := s.test(ctx, RoleGoodEnd, 0, Target{Rev: revs[0]})
	if err != nil {
		return res, err
	}
	if good.Verdict != Good {
		tl := good.Tally()
		res.Verdict = EndsWrong
		res.Reason = fmt.Sprintf("the good revision %s is not good: %d of %d runs failed as the bad one does (%s), %d failed otherwise, %d broken", revs[0], tl.Fail, tl.Runs(), res.Kind, tl.Other, tl.Broken)
		return res, nil
	}

	// The search proper: lo is the last revision known good, hi the first
	// known bad; untestable revisions between them are set aside.
	lo, hi := 0, last
	aside := map[int]Verdict{}
	for {
		mid, ok := pick(lo, hi, aside)
		if !ok {
			break
		}
		st, err := s.test(ctx, RoleSearch, mid, Target{Rev: revs[mid]})
		if err != nil {
			return res, err
		}
		switch st.Verdict {
		case Good:
			lo = mid
		case Bad:
			hi = mid
		default:
			aside[mid] = st.Verdict
		}
	}
	if hi-lo > 1 {
		res.Verdict = Inconclusive
		res.Candidates = append(res.Candidates, revs[lo+1:hi+1]...)
		var why []string
		for i := lo + 1; i < hi; i++ {
			why = append(why, fmt.Sprintf("%s %s", revs[i].Short(), aside[i]))
		}
		res.Reason = fmt.Sprintf("the first bad revision is one of %d: %s could not be judged (%s)", hi-lo, strings.Join(why, ", "), "a skip does not build or boot; an unclear one failed too seldom or otherwise")
		return s.finish(), nil
	}

	// Verify, KernelCI-style: the culprit fails again, its parent passes
	// again, and the bad end with the culprit reverted passes.
	culprit := revs[hi]
	res.Culprit = &culprit
	var failed []string
	if st, err := s.test(ctx, RoleVerifyCulprit, hi, Target{Rev: culprit}); err != nil {
		return res, err
	} else if st.Verdict != Bad {
		failed = append(failed, fmt.Sprintf("the culprit did not fail again (%s)", st.Verdict))
	}
	if st, err := s.test(ctx, RoleVerifyParent, lo, Target{Rev: revs[lo]}); err != nil {
		return res, err
	} else if st.Verdict != Good {
		failed = append(failed, fmt.Sprintf("its parent %s did not pass again (%s)", revs[lo].Short(), st.Verdict))
	}
	if hi != last {
		ok, why, err := t.CanRevert(ctx, revs[last], culprit)
		if err != nil {
			return res, err
		}
		res.Revert, res.RevertWhy = ok, why
		if ok {
			if st, err := s.test(ctx, RoleVerifyRevert, last, Target{Rev: revs[last], Revert: &culprit}); err != nil {
				return res, err
			} else if st.Verdict != Good {
				failed = append(failed, fmt.Sprintf("the bad revision with the culprit reverted did not pass (%s)", st.Verdict))
			}
		}
	} else {
		res.Revert, res.RevertWhy = false, "the culprit is the bad revision itself: its parent's runs are the revert's"
	}
	s.finish()
	switch {
	case len(failed) > 0:
		res.Verdict = Inconclusive
		res.Reason = "verification failed: " + strings.Join(failed, "; ")
	case res.Confidence < p.Threshold:
		res.Verdict = Inconclusive
		res.Reason = fmt.Sprintf("confidence %.3f is below the threshold %.2f (a bad revision fails %.0f%% of runs): raise --max-runs, or a scenario that fails more often", res.Confidence, p.Threshold, 100*res.Rate)
	default:
		res.Verdict = Found
	}
	return res, nil
}

// pick is the next revision to test strictly between lo and hi: the one
// nearest the middle not set aside.
func pick(lo, hi int, aside map[int]Verdict) (int, bool) {
	mid := (lo + hi) / 2
	for d := 0; mid-d > lo || mid+d < hi; d++ {
		for _, i := range []int{mid - d, mid + d} {
			if i > lo && i < hi {
				if _, ok := aside[i]; !ok {
					return i, true
				}
			}
		}
	}
	return 0, false
}

type searcher struct {
	t      Tester
	p      Policy
	alpha  float64
	res    *Result
	onStep func(Result)
}

// test runs the test on target until the policy judges it.
func (s *searcher) test(ctx context.Context, role Role, index int, target Target) (Step, error) {
	st := Step{Role: role, Target: target, Index: index}
	ev := Gather(s.res.Steps)
	for {
		run, err := s.t.Test(ctx, target, len(st.Runs)+1)
		if err != nil {
			return st, err
		}
		if run.Outcome == Fail {
			switch {
			case s.res.Kind == "" && role == RoleBadEnd:
				// The bad end's first failure says what is bisected.
				s.res.Kind, s.res.FirstTitle = Kind(run.Title), run.Title
			case Kind(run.Title) != s.res.Kind:
				run.Outcome = Other
			}
		}
		st.Runs = append(st.Runs, run)
		if v, done := s.p.judge(st.Tally(), ev, s.alpha); done {
			st.Verdict = v
			break
		}
	}
	switch st.Verdict {
	case Bad:
		st.Confidence = 1
	case Good:
		st.Confidence = ev.GoodConfidence(st.Tally().Pass)
	}
	s.res.Steps = append(s.res.Steps, st)
	if s.onStep != nil {
		s.onStep(*s.res)
	}
	return st, nil
}

// finish pools the evidence of every bad step and recomputes the good
// verdicts' confidences and their product with it.
func (s *searcher) finish() Result {
	ev := Gather(s.res.Steps)
	s.res.Evidence, s.res.Rate = ev, ev.Rate()
	s.res.Confidence = 1
	for i := range s.res.Steps {
		st := &s.res.Steps[i]
		if st.Verdict == Good {
			st.Confidence = ev.GoodConfidence(st.Tally().Pass)
			s.res.Confidence *= st.Confidence
		}
	}
	return *s.res
}
