package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
)

// QEMU 11.1 from the toolchain root (make deps builds it) boots the default
// x86_64 cell, the same cached kernel as QEMU 7.2's, and runs the storm to
// a pass; result.json names the emulator that ran it.
func TestX86QEMU111Passes(t *testing.T) {
	r := runFth(t, 30*time.Minute, "--qemu", "11.1", "--n", "500", "--agent-arg", "scenario=storm")
	r.mustCell(t)
	res := r.result
	if r.exit != 0 || res.Verdict != results.Pass {
		t.Fatalf("exit %d, verdict %s (%s), want a pass\n%s", r.exit, res.Verdict, res.Reason, r.stderr)
	}
	if !strings.Contains(res.QEMU, "version 11.1") {
		t.Errorf("result.json qemu = %q, want QEMU 11.1's version line", res.QEMU)
	}
	if res.Request == nil || res.Request.QEMU != "11.1" {
		t.Errorf("result.json request.qemu = %+v, want 11.1 (fth repro replays it)", res.Request)
	}
	if a := res.Phases["attach"]; a == nil || a.Succeeded < 500 {
		t.Errorf("attach phase = %+v, want 500 attached", a)
	}
}
