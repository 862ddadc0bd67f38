package bisect

import (
	"math"

	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// Evidence is what one revision's runs showed: failures of the kind
// bisected and passes (failures of other kinds and broken runs count
// neither way). A revision's failure probability r is not known, only
// this; with a uniform prior its posterior is Beta(Fail+1, Pass+1).
// Running a revision until its first failure, or until enough passes,
// does not change the likelihood r^Fail (1-r)^Pass, so not the posterior
// either.
type Evidence struct{ Fail, Pass int }

// Runs is how many runs the evidence counts.
func (e Evidence) Runs() int { return e.Fail + e.Pass }

// Add is the evidence of both.
func (e Evidence) Add(o Evidence) Evidence { return Evidence{e.Fail + o.Fail, e.Pass + o.Pass} }

// Rate is the posterior mean of the failure probability.
func (e Evidence) Rate() float64 {
	return float64(e.Fail+1) / float64(e.Runs()+2)
}

// Lower is the lower credible bound of the failure probability at level
// beta: the failure probability is below it with posterior probability
// beta (the beta-quantile of Beta(Fail+1, Pass+1)). Zero without a
// failure.
func (e Evidence) Lower(beta float64) float64 {
	if e.Fail == 0 {
		return 0
	}
	return distuv.Beta{Alpha: float64(e.Fail + 1), Beta: float64(e.Pass + 1)}.Quantile(beta)
}

// GoodConfidence is the confidence that a revision that passed n runs and
// failed none is good, against a reference failure probability ref (a
// lower bound of what a bad revision there fails at): one minus the
// probability that a bad revision failing at ref passes all n.
func GoodConfidence(n int, ref float64) float64 {
	if ref <= 0 {
		return 0
	}
	return 1 - math.Pow(1-ref, float64(n))
}

// PassesFor is the fewest passes after which GoodConfidence against ref
// reaches conf, or limit+1 when limit passes do not.
func PassesFor(conf, ref float64, limit int) int {
	if ref <= 0 {
		return limit + 1
	}
	n := int(math.Ceil(math.Log(1-conf) / math.Log(1-ref)))
	switch {
	case ref >= 1:
		n = 1
	case n < 1:
		n = 1
	case n > limit:
		n = limit + 1
	}
	return n
}

// sharedKind is the prior probability that the kind bisected is not the
// bug's alone: that some other bug, present since before the good end,
// shows the same title at the same location (see BadConfidence).
const sharedKind = 0.05

// BadConfidence is the confidence that a revision that failed e.Fail runs
// of the kind (and passed e.Pass) is bad, given good passes of revisions
// below it (the good end's and those judged good) with none of the kind.
//
// A failure of the kind at a good revision needs another bug with the
// same title and location, present since before the good end: prior
// probability sharedKind, its rate q then unknown (uniform) and bounded
// by the good passes, q ~ Beta(1, good+1). Against it, a bad revision
// fails at an unknown rate r (uniform). With even prior odds the
// confidence is the posterior probability of "bad".
func BadConfidence(e Evidence, good int) float64 {
	if e.Fail == 0 {
		return 0
	}
	f, s, g := float64(e.Fail), float64(e.Pass), float64(good)
	// P(shared | the good passes): the slab's marginal is 1/(g+1).
	shared := sharedKind / (g + 1) / (sharedKind/(g+1) + 1 - sharedKind)
	// E[q^f (1-q)^s] under Beta(1, g+1), against E[r^f (1-r)^s] under
	// Beta(1, 1), in logs.
	lGood := math.Log(shared) + mathext.Lbeta(1+f, 1+g+s) - mathext.Lbeta(1, 1+g)
	lBad := mathext.Lbeta(1+f, 1+s)
	return 1 / (1 + math.Exp(lGood-lBad))
}
