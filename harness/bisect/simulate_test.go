package bisect

import (
	"context"
	"math"
	"testing"
)

// binomialQuantile is the least k with P(Bin(n, p) <= k) >= q.
func binomialQuantile(q float64, n int, p float64) int {
	cdf := 0.0
	for k := 0; k <= n; k++ {
		lc, _ := math.Lgamma(float64(n + 1))
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		cdf += math.Exp(lc - lk - lnk + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
		if cdf >= q {
			return k
		}
	}
	return n
}

func TestBinomialQuantile(t *testing.T) {
	for _, tc := range []struct {
		q    float64
		n    int
		p    float64
		want int
	}{
		{0.5, 10, 0.5, 5},
		{0.99, 100, 0.1, 18},
		{0.99, 0, 0.1, 0},
	} {
		if got := binomialQuantile(tc.q, tc.n, tc.p); got != tc.want {
			t.Errorf("binomialQuantile(%g, %d, %g) = %d, want %d", tc.q, tc.n, tc.p, got, tc.want)
		}
	}
}

// TestEvaluate bisects thousands of simulated histories of 16 revisions
// per scenario under the default policy and checks that the confidence
// stated holds: of the culprits named, at most 1 - threshold are wrong,
// and no more than one minus their mean stated confidence, each up to the
// 99% quantile of the binomial count (the sampling slack). Where no
// culprit exists (the good end fails) a named one is wrong however sure:
// there at most 1 - threshold of all bisections may name one. With -v it
// prints the table docs/bisect.md shows.
func TestEvaluate(t *testing.T) {
	trials := 10000
	if testing.Short() {
		trials = 2000
	}
	p := DefaultPolicy()
	var scores []Score
	for i, tc := range []struct {
		sc Scenario
		// minRight is the least share of bisections that must name the
		// culprit: the policy is not only safe but useful.
		minRight float64
		// noAnswer: the good end fails, no culprit exists; never
		// (maxNamed 0) or seldom named.
		noAnswer bool
		maxNamed int
	}{
		{sc: Constant(1), minRight: 0.99},
		{sc: Constant(0.7), minRight: 0.97},
		{sc: Constant(MeasuredFlaky), minRight: 0.95},
		{sc: Constant(0.5), minRight: 0.95},
		{sc: Constant(0.3), minRight: 0.85},
		{sc: Constant(0.1), minRight: 0.15},
		{sc: Raised(0.2, 0.9), minRight: 0.8},
		{sc: Raised(0.1, 0.5), minRight: 0.45},
		{sc: Unbuildable(1), minRight: 0.8},
		{sc: Unbuildable(0.5), minRight: 0.8},
		{sc: GoodEndFails(0.5, false), noAnswer: true, maxNamed: 0},
		{sc: GoodEndFails(0.2, true), noAnswer: true, maxNamed: -1},
		{sc: MeasuredHistory(), minRight: 0.95},
	} {
		s, err := Evaluate(context.Background(), p, tc.sc, 16, trials, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		scores = append(scores, s)
		named := s.Named()
		switch {
		case tc.noAnswer && tc.maxNamed >= 0 && named > tc.maxNamed:
			t.Errorf("%s: %d of %d bisections named a culprit, want at most %d", s.Scenario, named, s.Bisections, tc.maxNamed)
		case tc.noAnswer && s.Wrong > binomialQuantile(0.99, s.Bisections, 1-p.Threshold):
			t.Errorf("%s: %d of %d bisections named a culprit where there is none", s.Scenario, s.Wrong, s.Bisections)
		case tc.noAnswer:
		case s.Wrong > binomialQuantile(0.99, named, 1-p.Threshold):
			t.Errorf("%s: %d of %d named culprits wrong, over the %.0f%% the threshold allows", s.Scenario, s.Wrong, named, 100*(1-p.Threshold))
		case named > 0 && s.Wrong > binomialQuantile(0.99, named, 1-s.Confidence/float64(named)):
			t.Errorf("%s: %d of %d named culprits wrong, more than their mean stated confidence %.3f allows", s.Scenario, s.Wrong, named, s.Confidence/float64(named))
		case float64(s.Right) < tc.minRight*float64(s.Bisections):
			t.Errorf("%s: %d of %d right, want at least %.0f%%", s.Scenario, s.Right, s.Bisections, 100*tc.minRight)
		}
	}
	t.Logf("%d bisections of 16 revisions per history, policy %+v:\n%s", trials, p, FormatScores(scores))
}
