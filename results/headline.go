package results

// HarnessCaused says the harness brought the report about itself (its own
// load starved the tasks the kernel waited for, or its agent crashed):
// reported, never counted as the kernel's.
func (f Finding) HarnessCaused() bool {
	return f.Kind.HarnessCaused() || f.Induced != ""
}

// Countable says f fails a cell: not the harness's doing, and not a known
// finding unless includeKnown.
func (f Finding) Countable(includeKnown bool) bool {
	return !f.HarnessCaused() && (f.Known == "" || includeKnown)
}

// Headline is what heads a cell (see Result.Headline).
type Headline struct {
	// Finding is the heading finding, in Result.Findings; nil when no
	// finding heads the cell. Index is its index, -1 for none.
	Finding *Finding
	Index   int
	Title   string
	// Counted says the headline is the kernel's own failure.
	Counted bool
}

// Headline decides what heads the cell. The verdict (the monitor's
// findings branch), the title (report, summary, compare, junit) and the
// mutation score all read it, so that they name the same thing:
//
//  1. the first countable finding (Finding.Countable) in r.Findings, which
//     are in order of appearance: counted, titled by the finding;
//  2. else, when the cell failed and has no finding at all, the failure
//     that is not a finding (a silent hang's watchdog, liveness, an
//     oracle, the agent): counted, titled by r.Reason;
//  3. else the first induced finding, then the first known one (titled
//     "known <ID>: <title>"): not counted;
//  4. else nothing: r.Reason titles, not counted (a pass, an error).
//
// Step 2 wants no finding at all because the monitor passes a cell with a
// known finding and errs on an induced stall whatever else failed: a fail
// beside them alone is a known finding counted by --include-known, which
// includeKnown false must not count.
func (r *Result) Headline(includeKnown bool) Headline {
	for i := range r.Findings {
		if f := &r.Findings[i]; f.Countable(includeKnown) {
			return Headline{Finding: f, Index: i, Title: f.Title, Counted: true}
		}
	}
	if len(r.Findings) == 0 {
		return Headline{Index: -1, Title: r.Reason, Counted: r.Verdict == Fail}
	}
	i := 0
	for j, f := range r.Findings {
		if f.HarnessCaused() {
			i = j
			break
		}
	}
	f := &r.Findings[i]
	h := Headline{Finding: f, Index: i, Title: f.Title}
	if !f.HarnessCaused() {
		h.Title = "known " + f.Known + ": " + f.Title
	}
	return h
}
