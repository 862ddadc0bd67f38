package options

import (
	"errors"
	"fmt"
	"strings"
)

// Validate checks values that a caller may have set without Set. Each
// option's bounds live in one place, its set function in the table: every
// option is printed with its get and read back with its set, so a value
// set directly is held to the same rule as one that came as text. Only
// rules that tie options together are written here.
func (o *Options) Validate() error {
	var errs []error
	scratch := *o
	for i := range fields {
		f := &fields[i]
		if err := f.set(&scratch, f.get(o)); err != nil {
			errs = append(errs, fmt.Errorf("option %s: %w", f.name, err))
		}
	}
	// Without either bound the churn would only end on a signal, and the
	// host would call that a hang.
	if o.Scenario == ScenarioChurn && o.Churn == 0 && o.Cycles == 0 {
		errs = append(errs, errors.New("option churn: churn=0 needs cycles > 0"))
	}
	if o.Scenario == ScenarioRepro && o.Repro == "" {
		errs = append(errs, fmt.Errorf("option repro: scenario=repro needs repro=<sequence> (%s)", strings.Join(Repros(), ", ")))
	}
	if o.Scenario == ScenarioStandalone && o.Reproducer == "" {
		errs = append(errs, errors.New("option reproducer: scenario=standalone needs reproducer=<name> (a directory of results/known/repro)"))
	}
	if o.MultiHold > 0 && o.Scenario != ScenarioChurn && o.Scenario != ScenarioCampaign {
		errs = append(errs, fmt.Errorf("option multihold: the tracing_multi population is held under the churn or the campaign; scenario=%s has neither (the bench's is multiliven)", o.Scenario))
	}
	return errors.Join(errs...)
}
