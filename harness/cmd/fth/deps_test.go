package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFthLinksNoGuestWorkload: the host and the guest share only the
// wire (wire/: events, options), so fth links none of the guest's
// packages (stress/...: the agent, its workloads and their reporting).
func TestFthLinksNoGuestWorkload(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const guest = "github.com/ftrace-harness/fth/stress/"
	var linked []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, guest) {
			linked = append(linked, p)
		}
	}
	if len(linked) > 0 {
		t.Errorf("fth links guest packages %s: what the host needs of them belongs in wire/", strings.Join(linked, ", "))
	}
}
