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
	Verdict string `json:"verdict"`
	// Culprit is the first bad revision, set only with the verdict Found:
	// verified, and at least Policy.Threshold confident.
	Culprit *Revision `json:"culprit,omitempty"`
	// Candidate is the revision the search ended at, named or not: with
	// an inconclusive verdict, the one verification did not confirm or
	// the confidence did not reach the threshold for.
	Candidate *Revision `json:"candidate,omitempty"`
	// Candidates are the revisions the first bad one is among when skips
	// (or unclear steps) left more than one.
	Candidates []Revision `json:"candidates,omitempty"`
	// Confidence is the answer's: the candidate's bad verdict's
	// (BadConfidence) times its parent's good verdict's (GoodConfidence
	// against Reference), each from all the revision's runs.
	Confidence float64 `json:"confidence"`
	// Rate is the candidate's estimated failure rate (Evidence.Rate), from
	// Evidence, its runs; Parent is its parent's runs.
	Rate     float64  `json:"rate"`
	Evidence Evidence `json:"evidence"`
	Parent   Evidence `json:"parent"`
	// Reference is the rate the parent was judged against: the lower
	// credible bound of the candidate's (Evidence.Lower).
	Reference float64 `json:"reference"`
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
	res := Result{Revisions: len(revs), Policy: p}
	if err := p.Check(); err != nil {
		return res, err
	}
	if len(revs) < 2 {
		return res, errors.New("bisect: want a good and a bad revision")
	}
	s := &searcher{t: t, p: p, res: &res, onStep: step, ev: map[evKey]Evidence{}}
	if ok, err := s.ends(ctx, revs); err != nil || !ok {
		return res, err
	}

	// The search proper: lo is the last revision judged good, hi the
	// first known bad; untestable revisions between them are set aside.
	// goods are the revisions judged good, in order: when the parent of
	// the candidate the search ends at turns out bad, it goes on below
	// it, from the good revision before.
	lo, hi := 0, len(revs)-1
	goods := []int{0}
	aside := map[int]Verdict{}
	for round := 1; ; round++ {
		res.Candidate, res.Revert, res.RevertWhy = nil, false, ""
		var err error
		if lo, hi, err = s.narrow(ctx, revs, lo, hi, aside, &goods); err != nil {
			return res, err
		}
		if hi-lo > 1 {
			res.Verdict = Inconclusive
			res.Candidates = append(res.Candidates, revs[lo+1:hi+1]...)
			var why []string
			for i := lo + 1; i < hi; i++ {
				why = append(why, fmt.Sprintf("%s %s", revs[i].Short(), aside[i]))
			}
			res.Reason = fmt.Sprintf("the first bad revision is one of %d: %s could not be judged (%s)", hi-lo, strings.Join(why, ", "), "a skip does not build or boot; an unclear one failed too seldom or otherwise")
			return res, nil
		}
		candidate := revs[hi]
		res.Candidate = &candidate
		v, err := s.verify(ctx, revs, lo, hi, round)
		if err != nil {
			return res, err
		}
		if !v.parentBad {
			s.conclude(lo, hi, v)
			return res, nil
		}
		goods = goods[:len(goods)-1]
		if len(goods) == 0 {
			tl := s.ev[evKey{index: 0}]
			res.Candidate = nil
			res.Verdict = EndsWrong
			res.Reason = fmt.Sprintf("the good revision %s is not good: verified as the parent of %s, it failed %d of %d runs as the bad one does (%s)", revs[0], candidate.Short(), tl.Fail, tl.Runs(), res.Kind)
			return res, nil
		}
		hi, lo = lo, goods[len(goods)-1]
	}
}

// ends tests the ends: the bad one until it fails, and on to measure its
// rate; the good one, judged against that rate. ok false: they do not
// behave as claimed (the result says so).
func (s *searcher) ends(ctx context.Context, revs []Revision) (ok bool, err error) {
	last := len(revs) - 1
	bad, err := s.test(ctx, RoleBadEnd, last, Target{Rev: revs[last]}, rule{measure: true})
	if err != nil {
		return false, err
	}
	if bad.Verdict != Bad {
		tl := bad.Tally()
		s.res.Verdict = EndsWrong
		s.res.Reason = fmt.Sprintf("the bad revision %s did not fail as claimed: %d of %d runs failed (%d needed), %d passed, %d failed otherwise, %d broken", revs[last], tl.Fail, tl.Runs(), s.p.BadFailures, tl.Pass, tl.Other, tl.Broken)
		return false, nil
	}
	good, err := s.test(ctx, RoleGoodEnd, 0, Target{Rev: revs[0]}, s.below(last))
	if err != nil {
		return false, err
	}
	if good.Verdict != Good {
		tl := good.Tally()
		s.res.Verdict = EndsWrong
		s.res.Reason = fmt.Sprintf("the good revision %s is not good (%s): %d of %d runs failed as the bad one does (%s), %d failed otherwise, %d broken", revs[0], good.Verdict, tl.Fail, tl.Runs(), s.res.Kind, tl.Other, tl.Broken)
		return false, nil
	}
	return true, nil
}

// narrow bisects between lo (good) and hi (bad) until they are adjacent
// or only revisions set aside lie between them, and returns them. Each
// revision is judged against hi's rate, not one rate for all: a later
// commit may have made the bug more likely. A revision judged good is
// appended to goods.
func (s *searcher) narrow(ctx context.Context, revs []Revision, lo, hi int, aside map[int]Verdict, goods *[]int) (int, int, error) {
	for {
		mid, ok := pick(lo, hi, aside)
		if !ok {
			return lo, hi, nil
		}
		st, err := s.test(ctx, RoleSearch, mid, Target{Rev: revs[mid]}, s.below(hi).measured())
		if err != nil {
			return lo, hi, err
		}
		switch st.Verdict {
		case Good:
			lo = mid
			*goods = append(*goods, mid)
		case Bad:
			hi = mid
		default:
			aside[mid] = st.Verdict
		}
	}
}

// conclude gives the verdict on the candidate hi, verified as v says.
func (s *searcher) conclude(lo, hi int, v verification) {
	res := s.res
	res.Evidence, res.Parent = s.ev[evKey{index: hi}], s.ev[evKey{index: lo}]
	res.Rate, res.Reference, res.Confidence = res.Evidence.Rate(), v.reference, v.confidence
	switch {
	case len(v.failed) > 0:
		res.Verdict = Inconclusive
		res.Reason = "verification failed: " + strings.Join(v.failed, "; ")
	case res.Confidence < s.p.Threshold:
		res.Verdict = Inconclusive
		res.Reason = fmt.Sprintf("confidence %.3f is below the threshold %.2f (the candidate failed %d of %d runs, its parent passed %d, judged against a failure rate of %.2f): raise --max-runs, or a scenario that fails more often", res.Confidence, s.p.Threshold, res.Evidence.Fail, res.Evidence.Runs(), res.Parent.Pass, res.Reference)
	default:
		res.Verdict = Found
		res.Culprit = res.Candidate
	}
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

// verification is what verify found.
type verification struct {
	// parentBad: the parent failed; the search goes on below it.
	parentBad bool
	// failed says what else did not hold.
	failed []string
	// confidence is the answer's, reference the rate the parent was
	// judged against.
	confidence, reference float64
}

// verify checks the candidate hi, whose parent is lo, in the search's
// round-th verification.
//
// The candidate runs again until it fails (and on until its rate is
// measured). If it is not the first bad revision, its parent is bad, and
// so is the bad end with the candidate reverted (it still holds the first
// bad one's change). Either may fail less often than the candidate, if
// the candidate raised the rate, so both are judged against the lower of
// a bound of their nearest bad revision's rate and Policy.MinRate; a wrong
// answer survives only if both passed every run, with probability at
// most the product of their misses. The answer's confidence is the
// candidate's bad verdict's times one minus that. The parent runs until
// its own miss is the square root of what the answer allows (all of it
// when there is no revert), the revert until the product is. The first
// round allows half the error of the threshold (and names the candidate
// at the threshold if the runs run out first). A parent found bad shows
// that the rate varies and that the search took a bad revision for good;
// each round after the first allows half the error of the one before.
func (s *searcher) verify(ctx context.Context, revs []Revision, lo, hi, round int) (verification, error) {
	var v verification
	last := len(revs) - 1
	candidate := revs[hi]
	st, err := s.test(ctx, RoleVerifyCulprit, hi, Target{Rev: candidate}, rule{measure: true, again: true})
	if err != nil {
		return v, err
	}
	if st.Verdict != Bad {
		v.failed = append(v.failed, fmt.Sprintf("the candidate did not fail again (%s)", st.Verdict))
		return v, nil
	}
	badConf := s.badConfidence(hi)
	want := 1 - (1-s.p.Threshold)/math.Pow(2, float64(round))
	allowed := max(1-want/max(badConf, 1e-9), 1e-9) // the miss the answer allows

	revert := false
	if hi != last {
		ok, why, err := s.t.CanRevert(ctx, revs[last], candidate)
		if err != nil {
			return v, err
		}
		s.res.Revert, s.res.RevertWhy, revert = ok, why, ok
	} else {
		s.res.Revert, s.res.RevertWhy = false, "the culprit is the bad revision itself: its parent's runs are the revert's"
	}

	pr := s.below(hi)
	pr.ref = min(pr.ref, s.p.MinRate)
	pr.conf = 1 - allowed
	if revert {
		pr.conf = 1 - math.Sqrt(allowed)
	}
	pr.cap = s.capFor(pr.conf)
	st, err = s.test(ctx, RoleVerifyParent, lo, Target{Rev: revs[lo]}, pr)
	if err != nil {
		return v, err
	}
	switch st.Verdict {
	case Good:
	case Bad:
		v.parentBad = true
		return v, nil
	default:
		v.failed = append(v.failed, fmt.Sprintf("its parent %s did not pass again (%s)", revs[lo].Short(), st.Verdict))
		return v, nil
	}
	v.reference = pr.ref
	miss := math.Pow(1-pr.ref, float64(s.ev[evKey{index: lo}].Pass))
	if revert {
		rr := s.below(last)
		rr.ref = min(rr.ref, s.p.MinRate)
		rr.conf, rr.carry = 1-allowed, miss
		rr.cap = s.capFor(1 - allowed/miss)
		st, err := s.test(ctx, RoleVerifyRevert, last, Target{Rev: revs[last], Revert: &candidate}, rr)
		if err != nil {
			return v, err
		}
		if st.Verdict != Good {
			v.failed = append(v.failed, fmt.Sprintf("the bad revision with the candidate reverted did not pass (%s)", st.Verdict))
			return v, nil
		}
		miss *= math.Pow(1-rr.ref, float64(s.ev[evKey{index: last, revert: true}].Pass))
	}
	v.confidence = badConf * (1 - miss)
	return v, nil
}

// capFor is the most runs of a verification step that asks conf: as
// many as Policy.MinRate needs, if MaxRuns is fewer.
func (s *searcher) capFor(conf float64) int {
	return max(s.p.MaxRuns, PassesFor(conf, s.p.MinRate, 10*s.p.MaxRuns))
}

// evKey names a target's evidence: a revision, or the bad end with the
// candidate reverted.
type evKey struct {
	index  int
	revert bool
}

type searcher struct {
	t      Tester
	p      Policy
	res    *Result
	onStep func(Result)
	// ev is every target's runs so far, pooled over its steps.
	ev map[evKey]Evidence
}

// rule is what a step needs for its verdict.
type rule struct {
	// ref is the rate a good verdict is judged against (0: never good
	// before the cap), conf the confidence it asks.
	ref, conf float64
	// measure runs a bad revision on to Policy.RateFailures failures.
	measure bool
	// again asks a bad verdict for a failure in this step's own runs.
	again bool
	// cap is the step's most runs, when not Policy.MaxRuns.
	cap int
	// carry is the probability that a wrong answer passed another
	// verdict's runs, which this one's multiply (0: none).
	carry float64
}

// confidence is a good verdict's after n passes: one minus the
// probability that a bad revision failing at ref passes them all (and
// the carried ones).
func (r rule) confidence(n int) float64 {
	c := GoodConfidence(n, r.ref)
	if r.carry > 0 {
		c = 1 - r.carry*(1-c)
	}
	return c
}

// below is the rule for a revision below the known-bad revision hi:
// good against the lower bound of hi's rate, at the threshold.
func (s *searcher) below(hi int) rule {
	return rule{ref: s.ev[evKey{index: hi}].Lower(s.p.Credible), conf: s.p.Threshold}
}

func (r rule) measured() rule {
	r.measure = true
	return r
}

// judge decides a step from its runs t and its target's pooled evidence,
// or says it needs another run.
func (s *searcher) judge(pooled Evidence, t Tally, r rule) (Verdict, bool) {
	p := s.p
	bad := pooled.Fail >= p.BadFailures && (!r.again || t.Fail > 0)
	limit := p.MaxRuns
	if r.cap > 0 {
		limit = r.cap
	}
	capped := t.Runs() >= limit
	switch {
	case bad && (!r.measure || pooled.Fail >= p.RateFailures || capped):
		return Bad, true
	case bad:
		return "", false
	case t.Broken >= p.MaxBroken:
		return Skip, true
	case pooled.Fail == 0 && t.Pass >= p.MinRuns && r.ref > 0 && r.confidence(pooled.Pass) >= r.conf:
		return Good, true
	case capped:
		if pooled.Fail == 0 && t.Pass >= p.MinRuns {
			// Fewer passes than the rule asks: a good verdict whose lower
			// confidence it states.
			return Good, true
		}
		return Unclear, true
	}
	return "", false
}

// goodBelow is the passes of the revisions below index with no failure
// of the kind: the good ones, if index is bad.
func (s *searcher) goodBelow(index int) int {
	n := 0
	for k, e := range s.ev {
		if !k.revert && k.index < index && e.Fail == 0 {
			n += e.Pass
		}
	}
	return n
}

func (s *searcher) badConfidence(index int) float64 {
	return BadConfidence(s.ev[evKey{index: index}], s.goodBelow(index))
}

// test runs the test on target until r judges it.
func (s *searcher) test(ctx context.Context, role Role, index int, target Target, r rule) (Step, error) {
	st := Step{Role: role, Target: target, Index: index}
	key := evKey{index: index, revert: target.Revert != nil}
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
		e := s.ev[key]
		switch run.Outcome {
		case Fail:
			e.Fail++
		case Pass:
			e.Pass++
		}
		s.ev[key] = e
		if v, done := s.judge(e, st.Tally(), r); done {
			st.Verdict = v
			break
		}
	}
	st.Evidence = s.ev[key]
	switch st.Verdict {
	case Bad:
		st.Confidence = s.badConfidence(index)
	case Good:
		st.Reference = r.ref
		st.Confidence = GoodConfidence(st.Evidence.Pass, r.ref)
	}
	s.res.Steps = append(s.res.Steps, st)
	if s.onStep != nil {
		s.onStep(*s.res)
	}
	return st, nil
}
