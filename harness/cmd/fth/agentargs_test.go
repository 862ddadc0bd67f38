package main

import (
	"errors"
	"testing"
)

func TestAgentArgsInto(t *testing.T) {
	agent := map[string]string{"n": "2000"}
	if err := (multiFlag{"scenario=churn", "n=0"}).into(agent); err != nil {
		t.Fatal(err)
	}
	if agent["scenario"] != "churn" || agent["n"] != "0" {
		t.Errorf("agent = %v, want scenario=churn and n overridden to 0", agent)
	}
	for _, bad := range []string{"noequals", "=v", "k=a b", "k=a\tb"} {
		if err := (multiFlag{bad}).into(map[string]string{}); !errors.Is(err, errUsage) {
			t.Errorf("%q: err = %v, want a usage error", bad, err)
		}
	}
}
