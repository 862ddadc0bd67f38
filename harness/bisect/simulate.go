package bisect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Simulation is a Tester of a simulated history: revision i fails a run
// with probability Rates[i], always with one kernel report; the revisions
// in Broken do not build. The bad end with a revision reverted fails as
// if that revision's change of the rate were undone (see revertRate).
type Simulation struct {
	Revs   []Revision
	Rates  []float64
	Broken map[int]bool
	// Runs counts the runs so far.
	Runs  int
	rng   *rand.Rand
	index map[string]int
}

// NewSimulation is a simulated history with the given failure rates,
// drawing its runs from rng.
func NewSimulation(rates []float64, broken map[int]bool, rng *rand.Rand) *Simulation {
	s := &Simulation{Rates: rates, Broken: broken, rng: rng, index: map[string]int{}}
	for i := range rates {
		r := Revision{ID: fmt.Sprintf("%012x%028x", i+1, 0), Subject: fmt.Sprintf("commit %d", i)}
		s.Revs = append(s.Revs, r)
		s.index[r.ID] = i
	}
	return s
}

// Test runs target once.
func (s *Simulation) Test(_ context.Context, t Target, _ int) (Run, error) {
	s.Runs++
	i, ok := s.index[t.Rev.ID]
	if !ok {
		return Run{}, fmt.Errorf("simulation: no revision %s", t.Rev.ID)
	}
	rate := s.Rates[i]
	if t.Revert != nil {
		rate = s.revertRate(i, s.index[t.Revert.ID])
	}
	switch {
	case s.Broken[i]:
		return Run{Outcome: Broken, Reason: "kernel build: error"}, nil
	case s.rng.Float64() < rate:
		return Run{Outcome: Fail, Title: fmt.Sprintf("Oops: int3 in bpf_trampoline_%d", s.rng.Int64())}, nil
	}
	return Run{Outcome: Pass}, nil
}

// revertRate is revision i's rate without revision k's change of it: the
// change k made (its rate less its parent's) taken away, and none left
// when k is where the bug appeared.
func (s *Simulation) revertRate(i, k int) float64 {
	if k == 0 || k > i {
		return s.Rates[i]
	}
	if s.Rates[k-1] == 0 {
		return 0
	}
	return max(0, s.Rates[i]-(s.Rates[k]-s.Rates[k-1]))
}

// CanRevert says every revision reverts.
func (s *Simulation) CanRevert(context.Context, Revision, Revision) (bool, string, error) {
	return true, "", nil
}

// Scenario is a kind of history the evaluator bisects many times.
type Scenario struct {
	Name string
	// History draws one history of n revisions: each revision's failure
	// rate and the revisions that do not build. The right answer is the
	// first revision with a rate above zero; when that is the good end,
	// there is none, and any culprit named is wrong.
	History func(rng *rand.Rand, n int) (rates []float64, broken map[int]bool)
}

// Constant is a bug that appears at a random revision (never the good
// end) and fails a run with probability rate from there on.
func Constant(rate float64) Scenario {
	return Scenario{
		Name: fmt.Sprintf("fails %.0f%% from the culprit on", 100*rate),
		History: func(rng *rand.Rand, n int) ([]float64, map[int]bool) {
			return steps(n, 1+rng.IntN(n-1), rate, n, rate), nil
		},
	}
}

// Raised is a bug that appears at a random revision failing at first,
// and that a later random commit makes fail at then.
func Raised(first, then float64) Scenario {
	return Scenario{
		Name: fmt.Sprintf("fails %.0f%%, a later commit raises it to %.0f%%", 100*first, 100*then),
		History: func(rng *rand.Rand, n int) ([]float64, map[int]bool) {
			c := 1 + rng.IntN(n-2)
			d := c + 1 + rng.IntN(n-1-c)
			return steps(n, c, first, d, then), nil
		},
	}
}

// Unbuildable is Constant(rate) with one random revision between the
// ends that does not build.
func Unbuildable(rate float64) Scenario {
	return Scenario{
		Name: fmt.Sprintf("fails %.0f%%, one revision does not build", 100*rate),
		History: func(rng *rand.Rand, n int) ([]float64, map[int]bool) {
			return steps(n, 1+rng.IntN(n-1), rate, n, rate), map[int]bool{1 + rng.IntN(n-2): true}
		},
	}
}

// GoodEndFails is a history whose good end is not good: every revision
// fails at rate, or (raised) at rate until a random commit raises it to
// 0.9.
func GoodEndFails(rate float64, raised bool) Scenario {
	name := fmt.Sprintf("the good end fails too (%.0f%% everywhere)", 100*rate)
	if raised {
		name = fmt.Sprintf("the good end fails %.0f%%, a commit raises it to 90%%", 100*rate)
	}
	return Scenario{
		Name: name,
		History: func(rng *rand.Rand, n int) ([]float64, map[int]bool) {
			if !raised {
				return steps(n, 0, rate, n, rate), nil
			}
			return steps(n, 0, rate, 1+rng.IntN(n-1), 0.9), nil
		},
	}
}

// steps is n rates: 0 before c, first from c, then from d.
func steps(n, c int, first float64, d int, then float64) []float64 {
	rates := make([]float64, n)
	for i := range rates {
		switch {
		case i >= d:
			rates[i] = then
		case i >= c:
			rates[i] = first
		}
	}
	return rates
}

// MeasuredFlaky is the failure rate of docs/bisect.md's flaky reproducer
// on its culprit kernel, measured: 17 of 30 runs failed
// (scripts/flaky-rate.sh, 2026-11-29; the good end 0 of 30).
const MeasuredFlaky = 17.0 / 30

// The flaky reproducer's other measured rates (scripts/flaky-rate.sh,
// 2026-12-07, 30 runs each): the synthetic history's bad end (the
// culprit and the marker commits after it) failed 12 of 30, and the bad
// end with the culprit reverted MeasuredRevert.
const (
	MeasuredBadEnd = 12.0 / 30
	MeasuredRevert = 0.0 / 30
)

// MeasuredHistory is docs/bisect.md's synthetic history with its measured
// rates: 16 revisions, the culprit at 9 failing MeasuredFlaky, every
// later one at MeasuredBadEnd (their content is the bad end's, less some
// marker ints), none before. A revert of the culprit undoes the whole
// rate (Simulation.revertRate), as MeasuredRevert says it does.
func MeasuredHistory() Scenario {
	return Scenario{
		Name: fmt.Sprintf("the flaky case's measured history (%.0f%% at the culprit, %.0f%% after)", 100*MeasuredFlaky, 100*MeasuredBadEnd),
		History: func(_ *rand.Rand, n int) ([]float64, map[int]bool) {
			c := min(9, n-1)
			rates := steps(n, c, MeasuredFlaky, c+1, MeasuredBadEnd)
			return rates, nil
		},
	}
}

// Scenarios are the histories Evaluate is checked against: constant
// rates from deterministic to one run in ten, the flaky reproducer's
// measured rate, rates a later commit raises, a revision that does not
// build, and good ends that fail.
func Scenarios() []Scenario {
	return []Scenario{
		Constant(1), Constant(0.7), Constant(MeasuredFlaky), Constant(0.5), Constant(0.3), Constant(0.1),
		Raised(0.2, 0.9), Raised(0.1, 0.5),
		Unbuildable(1), Unbuildable(0.5),
		GoodEndFails(0.5, false), GoodEndFails(0.2, true),
		MeasuredHistory(),
	}
}

// Score is how a policy did on many bisections of one scenario.
type Score struct {
	Scenario string
	// Bisections ran; Right and Wrong named a culprit, Inconclusive did
	// not (inconclusive, or the ends wrong).
	Bisections, Right, Wrong, Inconclusive int
	// Runs is every bisection's runs together.
	Runs int
	// Confidence is the stated confidences of the named culprits, summed.
	Confidence float64
}

// Named is how many bisections named a culprit.
func (s Score) Named() int { return s.Right + s.Wrong }

// WrongRate is the fraction of named culprits that were wrong.
func (s Score) WrongRate() float64 {
	if s.Named() == 0 {
		return 0
	}
	return float64(s.Wrong) / float64(s.Named())
}

// Evaluate bisects trials histories of sc, each of n revisions, under p,
// with runs drawn from a PCG source seeded with seed.
func Evaluate(ctx context.Context, p Policy, sc Scenario, n, trials int, seed uint64) (Score, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	score := Score{Scenario: sc.Name}
	for range trials {
		rates, broken := sc.History(rng, n)
		sim := NewSimulation(rates, broken, rng)
		res, err := Search(ctx, sim, sim.Revs, p, nil)
		if err != nil {
			return score, fmt.Errorf("%s: %w", sc.Name, err)
		}
		score.Bisections++
		score.Runs += sim.Runs
		truth := -1
		for i, r := range rates {
			if r > 0 {
				truth = i
				break
			}
		}
		switch {
		case res.Verdict != Found:
			score.Inconclusive++
		case truth > 0 && res.Culprit.ID == sim.Revs[truth].ID:
			score.Right++
			score.Confidence += res.Confidence
		default:
			score.Wrong++
			score.Confidence += res.Confidence
		}
	}
	return score, nil
}

// FormatScores is scores as a Markdown table: per scenario the culprits
// named right and wrong, the bisections without one, the wrong share of
// the named, their mean stated confidence and the mean runs.
func FormatScores(scores []Score) string {
	var b strings.Builder
	b.WriteString("| history | bisections | right | wrong | inconclusive | wrong of named | stated confidence | runs a bisection |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, s := range scores {
		conf := "-"
		if s.Named() > 0 {
			conf = fmt.Sprintf("%.3f", s.Confidence/float64(s.Named()))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.1f%% | %s | %.1f |\n", s.Scenario, s.Bisections, s.Right, s.Wrong, s.Inconclusive, 100*s.WrongRate(), conf, float64(s.Runs)/math.Max(1, float64(s.Bisections)))
	}
	return b.String()
}
