package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpRate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	lines := `{"kind":"hello"}
{"kind":"op","op":{"phase":"load","function":"f","index":1,"t_ms":1000,"cpu":0}}
{"kind":"op","op":{"phase":"attach","function":"f","index":1}}
{"kind":"op","op":{"phase":"fentry_first","function":"f","index":2,"t_ms":2000,"cpu":1}}
not json
{"kind":"op","op":{"phase":"detach_fentry","function":"f","index":3,"t_ms":3000,"cpu":1}}
`
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	// Three logged operations (the storm's op without a CPU is not one of
	// the churn's) over two seconds: two intervals, one per second.
	if got := opRate(p); got != 1 {
		t.Errorf("opRate = %v, want 1", got)
	}
	if got := opRate(filepath.Join(t.TempDir(), "missing")); got != 0 {
		t.Errorf("opRate(missing) = %v", got)
	}
}
