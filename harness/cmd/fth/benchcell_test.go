package main

import (
	"testing"

	"github.com/ftrace-harness/fth/harness/matrix"
)

// Both cells run the default cell's scenario (the campaign) unless the
// baseline's options name another, with the one seed.
func TestBenchCellVariants(t *testing.T) {
	def := matrix.DefaultParams()
	for _, tt := range []struct {
		name      string
		base      map[string]string
		wantNames []string
		wantScen  []string
	}{
		{"default alone", nil, []string{"default"}, []string{"campaign"}},
		{"delivery off", map[string]string{"delivery": "false"}, []string{"baseline", "default"}, []string{"campaign", "campaign"}},
		{"storm baseline", map[string]string{"scenario": "storm"}, []string{"baseline", "default"}, []string{"storm", "campaign"}},
	} {
		vs := benchCellVariants(def, tt.base, 42)
		if len(vs) != len(tt.wantNames) {
			t.Fatalf("%s: %d variants, want %d", tt.name, len(vs), len(tt.wantNames))
		}
		for i, v := range vs {
			if v.name != tt.wantNames[i] || v.agent["scenario"] != tt.wantScen[i] || v.agent["seed"] != "42" || v.agent["n"] != def.Agent["n"] {
				t.Errorf("%s: variant %d = %s %v, want %s with scenario %s, seed 42", tt.name, i, v.name, v.agent, tt.wantNames[i], tt.wantScen[i])
			}
		}
		if tt.base["delivery"] != "" && vs[0].agent["delivery"] != "false" {
			t.Errorf("%s: the baseline lost its option: %v", tt.name, vs[0].agent)
		}
	}
}
