package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
)

// Ctrl-C (SIGINT) and a SIGKILL of the harness itself must both leave no QEMU
// behind and a readable result.json.
func TestInterruptLeavesNoQEMU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sig     syscall.Signal
		verdict results.Verdict
	}{
		{"sigint", syscall.SIGINT, results.Error},
		// A killed harness cannot write a verdict: the record stays "running".
		{"sigkill", syscall.SIGKILL, results.Running},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := e2eOut(t)
			// A hold nobody else uses marks this test's QEMU in the process list.
			marker := "fth.hold=17m3s"
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, fthBin, "run", "--arch", "x86_64", "--out", out, "--run-id", "r", "--n", "100", "--hold", "17m3s")
			cmd.Dir = "../.."
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			events := ""
			for start := time.Now(); time.Since(start) < 8*time.Minute; time.Sleep(500 * time.Millisecond) {
				m, _ := filepath.Glob(filepath.Join(out, "r", "*", "events.jsonl"))
				if len(m) == 1 {
					if b, _ := os.ReadFile(m[0]); bytes.Contains(b, []byte(`"kind":"phase","phase":{"name":"attach"`)) {
						events = m[0]
						break
					}
				}
			}
			if events == "" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the agent never finished attaching; stderr:\n%s", stderr.String())
			}
			if !qemuRunning(marker) {
				t.Fatal("no QEMU with the marker found while the guest runs: the check below would prove nothing")
			}
			cmd.Process.Signal(tc.sig)
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("fth did not exit within 30s of %s", tc.sig)
			}
			// QEMU's exit after SIGKILL of its parent is asynchronous; allow a moment.
			gone := false
			for i := 0; i < 20 && !gone; i++ {
				gone = !qemuRunning(marker)
				time.Sleep(250 * time.Millisecond)
			}
			if !gone {
				exec.Command("pkill", "-KILL", "-f", marker).Run()
				t.Fatalf("QEMU outlived fth after %s", tc.sig)
			}
			res, err := results.ReadResult(filepath.Join(filepath.Dir(events), "result.json"))
			if err != nil {
				t.Fatalf("result.json unreadable after %s: %v", tc.sig, err)
			}
			if res.Verdict != tc.verdict {
				t.Errorf("verdict = %s (%s), want %s", res.Verdict, res.Reason, tc.verdict)
			}
			if res.Phases["attach"] == nil || res.Phases["attach"].Succeeded == 0 {
				t.Errorf("the attach phase recorded before the signal is missing: %+v", res.Phases)
			}
		})
	}
}

func qemuRunning(marker string) bool {
	return len(processesMatching("qemu-system", marker)) > 0
}

// processesMatching lists the command lines of running processes that
// contain every one of subs, read from /proc (no pgrep: a minimal container
// may lack procps, and a missing tool must not make the check vacuous).
func processesMatching(subs ...string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || len(b) == 0 {
			continue
		}
		cmd := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		all := true
		for _, s := range subs {
			all = all && strings.Contains(cmd, s)
		}
		if all {
			out = append(out, cmd)
		}
	}
	return out
}

// The no-QEMU-left checks read /proc; they must see a process that exists.
func TestProcessesMatchingSeesItself(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := processesMatching(filepath.Base(exe)); len(got) == 0 {
		t.Errorf("processesMatching(%q) found nothing, not even this test", filepath.Base(exe))
	}
	if got := processesMatching("no-such-process-" + t.Name()); len(got) != 0 {
		t.Errorf("found %q", got)
	}
}
