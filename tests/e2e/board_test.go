package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	fthssh "github.com/ftrace-harness/fth/harness/machine/ssh"
	"github.com/ftrace-harness/fth/results"
)

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startBoardVM boots `fth boardvm` and waits for its "board up" line. The
// VM is stopped (SIGINT, as a developer would) at the end of the test, and
// the test fails if a QEMU with its port forward is left behind.
func startBoardVM(t *testing.T, dir string, port int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(fthBin, "boardvm", "--arch", "x86_64", "--port", fmt.Sprint(port), "--dir", dir)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "board up:") {
				up <- sc.Text()
			}
		}
		close(up)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("fth boardvm did not stop within 20s of SIGINT")
		}
		if left := processesMatching("qemu-system", fmt.Sprintf("hostfwd=tcp:127.0.0.1:%d-", port)); len(left) > 0 {
			t.Errorf("QEMU left behind after fth boardvm stopped: %q", left)
		}
	})
	select {
	case line, ok := <-up:
		if !ok {
			t.Fatalf("fth boardvm ended before the board came up:\n%s", stderr.String())
		}
		t.Log(line)
	case <-time.After(20 * time.Minute): // includes a cold kernel build
		t.Fatalf("board VM not up in time:\n%s", stderr.String())
	}
	return cmd
}

// runSoak runs `fth soak` against the board VM.
func runSoak(t *testing.T, timeout time.Duration, out string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	full := append([]string{"soak", "--out", out, "--run-id", "r"}, args...)
	cmd := exec.CommandContext(ctx, fthBin, full...)
	cmd.Dir = "../.."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("fth soak: %v", err)
	}
	t.Logf("fth %s: exit %d in %s\nstdout:\n%s", strings.Join(full, " "), code, time.Since(start).Round(time.Second), stdout.String())
	return code, stdout.String(), stderr.String()
}

// soakResult reads the one cell a soak wrote under out and returns its
// result and directory.
func soakResult(t *testing.T, out, stderr string) (results.Result, string) {
	t.Helper()
	cells, _ := filepath.Glob(filepath.Join(out, "r", "*", "result.json"))
	if len(cells) != 1 {
		t.Fatalf("no result.json (stderr:\n%s)", stderr)
	}
	r, err := results.ReadResult(cells[0])
	if err != nil {
		t.Fatal(err)
	}
	return r, filepath.Dir(cells[0])
}

// The SSH-board path for real, no mocks: a QEMU VM running u-root's sshd
// on a loopback port forward is the board. A short soak deploys the agent,
// streams kmsg, and is panicked mid-soak; the harness must record the
// crash from pstore and tell the reboot (new boot_id) from a blip. A wrong
// host key must be refused before anything runs.
func TestBoardSoakSurvivesPanic(t *testing.T) {
	base := e2eOut(t)
	dir := filepath.Join(base, "board")
	port := freePort(t)
	vm := startBoardVM(t, dir, port)
	target := fmt.Sprintf("ssh://root@127.0.0.1:%d", port)

	t.Run("wrong host key refused", func(t *testing.T) {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		spk, _ := gossh.NewPublicKey(pub)
		bad := filepath.Join(base, "bad_known_hosts")
		line := knownhosts.Line([]string{knownhosts.Normalize(fmt.Sprintf("127.0.0.1:%d", port))}, spk)
		if err := os.WriteFile(bad, []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runSoak(t, 2*time.Minute, filepath.Join(base, "badkey"), "--target", target,
			"--known-hosts", bad, "-i", filepath.Join(dir, "id_ed25519"), "--duration", "30s")
		if code != 2 || !strings.Contains(stderr, "CHANGED") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and a host key CHANGED error", code, stderr)
		}
	})

	t.Run("killed harness leaves a record and no agent", func(t *testing.T) {
		killedSoak(t, filepath.Join(base, "killed"), dir, target)
	})

	t.Run("network blip", func(t *testing.T) {
		blipSoak(t, filepath.Join(base, "blip"), dir, target, vm)
	})

	// The same monitor runs a board as a VM: a hang that stops one task
	// while the agent goes on talking ends the soak a tail after the
	// report, with the board's blocked tasks, not at --duration. It runs
	// before the panic, whose reboot clears the task it leaves in D state.
	t.Run("partial hang ends the soak", func(t *testing.T) {
		out := filepath.Join(base, "hang")
		start := time.Now()
		code, _, stderr := runSoak(t, 10*time.Minute, out, "--target", target,
			"--known-hosts", filepath.Join(dir, "known_hosts"), "-i", filepath.Join(dir, "id_ed25519"),
			"--duration", "20m", "--scenario", "storm", "--agent-arg", "n=20", "--agent-arg", "crash=hung-task", "--agent-arg", "hold=20m")
		took := time.Since(start)
		r, cell := soakResult(t, out, stderr)
		if code != 1 || r.Verdict != results.Fail || r.Ended != "hang-report" || !strings.Contains(r.Reason, "INFO: task hung") {
			t.Errorf("exit %d, verdict %s, ended %q, reason %q; want a fail ended by the hung-task report's tail (stderr:\n%s)", code, r.Verdict, r.Ended, r.Reason, stderr)
		}
		if took > 6*time.Minute {
			t.Errorf("the soak took %s: a partial hang must end it a tail after the report, not at --duration", took.Round(time.Second))
		}
		if b, err := os.ReadFile(filepath.Join(cell, "tasks.txt")); err != nil || !bytes.Contains(b, []byte("==")) {
			t.Errorf("tasks.txt: %v, %q; want the agent's task stacks", err, b)
		}
	})

	t.Run("panic mid-soak", func(t *testing.T) {
		out := filepath.Join(base, "soak")
		code, _, stderr := runSoak(t, 15*time.Minute, out, "--target", target,
			"--known-hosts", filepath.Join(dir, "known_hosts"), "-i", filepath.Join(dir, "id_ed25519"),
			"--duration", "3m", "--crash-after", "75s", "--reconnect-tries", "20", "--resume",
			"--agent-arg", "hot=4", "--agent-arg", "seed=42", "--agent-arg", "modlist="+stableModules, "--agent-arg", "n=0")
		r, cell := soakResult(t, out, stderr)
		if code != 1 || r.Verdict != results.Fail {
			t.Errorf("exit %d verdict %s (%s); want a fail (stderr:\n%s)", code, r.Verdict, r.Reason, stderr)
		}
		if r.Board == nil {
			t.Fatalf("no board section in %s", cell)
		}
		b := r.Board
		if b.Uname != "x86_64" || r.Arch != "x86_64" || len(b.DeploySeconds) == 0 {
			t.Errorf("arch %q, board = %+v, want x86_64 and a timed deploy", r.Arch, b)
		}
		if len(b.Reconnects) == 0 || !b.Reconnects[0].Rebooted || !b.Reconnects[0].Back || len(b.BootIDs) != 2 {
			t.Errorf("reconnects %+v, boot_ids %v: want one reboot detected by a new boot_id", b.Reconnects, b.BootIDs)
		}
		pstore := false
		for _, f := range r.Findings {
			if f.Source == "pstore" && strings.Contains(f.Title, "sysrq") {
				pstore = true
			}
		}
		if !pstore {
			t.Errorf("findings %+v: want the sysrq panic recovered from pstore", r.Findings)
		}
		evs, _ := os.ReadFile(filepath.Join(cell, "events.jsonl"))
		if ops := bytes.Count(evs, []byte(`"kind":"op"`)); ops < 10 {
			t.Errorf("%d churn operations logged before the panic: the agent did not run", ops)
		}
		// --resume: after the reboot the agent is deployed again (the
		// board's /tmp went with the old boot) and runs out the soak.
		if len(b.DeploySeconds) != 2 || bytes.Count(evs, []byte(`"kind":"hello"`)) != 2 {
			t.Errorf("deploys %v, %d agent hellos: want the soak resumed once after the reboot", b.DeploySeconds, bytes.Count(evs, []byte(`"kind":"hello"`)))
		}
		con, _ := os.ReadFile(filepath.Join(cell, "console.log"))
		if !bytes.Contains(con, []byte("Linux version")) {
			t.Errorf("console.log does not hold the board's kernel log")
		}
		t.Logf("deploy %v s, reconnect %+v, findings %d", b.DeploySeconds, b.Reconnects, len(r.Findings))
	})
}

// killedSoak SIGKILLs `fth soak` while the agent churns on the board, as a
// crash of the harness would: result.json must still read (verdict
// running, the board section in it), every event written so far must parse,
// and the agent on the board must stop by itself once its session is gone,
// leaving no stress burning the board.
func killedSoak(t *testing.T, out, dir, target string) {
	cmd := exec.Command(fthBin, "soak", "--out", out, "--run-id", "r", "--target", target,
		"--known-hosts", filepath.Join(dir, "known_hosts"), "-i", filepath.Join(dir, "id_ed25519"),
		"--duration", "5m", "--agent-arg", "hot=4", "--agent-arg", "seed=43", "--agent-arg", "modlist="+stableModules, "--agent-arg", "n=0")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	var evPath string
	deadline := time.Now().Add(4 * time.Minute)
	for ops := 0; ops < 20; {
		if time.Now().After(deadline) {
			t.Fatalf("no 20 churn operations within 4 minutes (%d); stderr:\n%s", ops, stderr.String())
		}
		time.Sleep(time.Second)
		m, _ := filepath.Glob(filepath.Join(out, "r", "*", "events.jsonl"))
		if len(m) == 1 {
			evPath = m[0]
			b, _ := os.ReadFile(evPath)
			ops = bytes.Count(b, []byte(`"kind":"op"`))
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed = true
	killedAt := time.Now()

	r, err := results.ReadResult(filepath.Join(filepath.Dir(evPath), "result.json"))
	if err != nil {
		t.Fatalf("result.json after SIGKILL: %v", err)
	}
	if r.Verdict != results.Running || r.Board == nil || len(r.Board.DeploySeconds) != 1 {
		t.Errorf("result after SIGKILL: verdict %s, board %+v; want running with the deploy recorded", r.Verdict, r.Board)
	}
	b, _ := os.ReadFile(evPath)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range lines {
		var ev map[string]any
		// Only the last line may be cut short by the kill.
		if err := json.Unmarshal([]byte(l), &ev); err != nil && i < len(lines)-1 {
			t.Errorf("events.jsonl line %d does not parse after SIGKILL: %v", i+1, err)
		}
	}

	c := dialBoard(t, dir, target)
	defer c.Close()
	for {
		procs, err := boardProcesses(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		agents := 0
		for _, p := range procs {
			if strings.Contains(p, "fth-agent") {
				agents++
			}
		}
		if agents == 0 {
			t.Logf("the board's agent and kmsg stream were gone %s after the harness was killed", time.Since(killedAt).Round(100*time.Millisecond))
			boardIsClean(t, c)
			return
		}
		// The clean stop took about 30 s here (listing /proc over SSH
		// included); past the agent's orphan guard (90 s) nothing may be
		// left, whichever way it went.
		if time.Since(killedAt) > 2*time.Minute {
			t.Fatalf("%d agent or kmsg processes still run on the board 2 minutes after the harness died: orphans:\n%s", agents, strings.Join(procs, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// dialBoard connects to the board VM with the keys `fth boardvm` wrote.
func dialBoard(t *testing.T, dir, target string) *fthssh.Client {
	t.Helper()
	tg, err := fthssh.ParseAddr(target)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := fthssh.Dial(ctx, fthssh.Config{Addr: tg,
		HostKeys: fthssh.HostKeys{KnownHosts: []string{filepath.Join(dir, "known_hosts")}},
		Auth:     fthssh.Auth{IdentityFiles: []string{filepath.Join(dir, "id_ed25519")}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// boardProcesses returns the command line of every process on the board.
// u-root has no ps; /proc is read one process at a time, and a process
// that ends in between is simply not listed.
func boardProcesses(ctx context.Context, c *fthssh.Client) ([]string, error) {
	ls, err := c.Output(ctx, "ls /proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc on the board: %w", err)
	}
	var procs []string
	for _, f := range strings.Fields(string(ls)) {
		if strings.Trim(f, "0123456789") != "" {
			continue
		}
		b, err := c.Output(ctx, "cat /proc/"+f+"/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		procs = append(procs, strings.ReplaceAll(string(b), "\x00", " "))
	}
	return procs, nil
}

// startSoak starts `fth soak` against the board VM and waits until the
// agent has logged ops churn operations. It returns the command and the
// cell's events.jsonl.
func startSoak(t *testing.T, out, dir, target string, ops int, args ...string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	full := append([]string{"soak", "--out", out, "--run-id", "r", "--target", target,
		"--known-hosts", filepath.Join(dir, "known_hosts"), "-i", filepath.Join(dir, "id_ed25519")}, args...)
	cmd := exec.Command(fthBin, full...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(4 * time.Minute)
	for n := 0; n < ops; {
		if time.Now().After(deadline) {
			t.Fatalf("no %d churn operations within 4 minutes (%d); stderr:\n%s", ops, n, stderr.String())
		}
		time.Sleep(time.Second)
		if m, _ := filepath.Glob(filepath.Join(out, "r", "*", "events.jsonl")); len(m) == 1 {
			b, _ := os.ReadFile(m[0])
			if n = bytes.Count(b, []byte(`"kind":"op"`)); n >= ops {
				return cmd, &stderr, m[0]
			}
		}
	}
	panic("unreachable")
}

// blipSoak pulls the board VM's network cable for 40 s mid-soak (QMP
// set_link through `fth boardvm`'s SIGUSR1/SIGUSR2): the soak must see the
// connection drop, find the same boot_id when the board answers again (a
// blip, not a reboot, and no finding), make sure the old agent is gone,
// and run a fresh one for the time left, ending in a pass.
func blipSoak(t *testing.T, out, dir, target string, vm *exec.Cmd) {
	cmd, stderr, evPath := startSoak(t, out, dir, target, 20, "--duration", "150s", "--reconnect-tries", "20",
		"--agent-arg", "hot=4", "--agent-arg", "seed=44", "--agent-arg", "modlist="+stableModules, "--agent-arg", "n=0")
	if err := vm.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// Keepalives notice the cut in 10-20 s; 40 s leaves the soak time to
	// try (and fail) a redial while the cable is out.
	time.Sleep(40 * time.Second)
	if err := vm.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Minute):
		t.Fatalf("the soak did not end 10 minutes after the blip; stderr:\n%s", stderr.String())
	}
	r, rerr := results.ReadResult(filepath.Join(filepath.Dir(evPath), "result.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || r.Verdict != results.Pass {
		t.Errorf("soak: %v, verdict %s (%s); want a pass: a blip is no finding (stderr:\n%s)", err, r.Verdict, r.Reason, stderr.String())
	}
	b := r.Board
	if b == nil {
		t.Fatal("no board section")
	}
	if len(b.Reconnects) != 1 || b.Reconnects[0].Rebooted || !b.Reconnects[0].Back || len(b.BootIDs) != 1 {
		t.Fatalf("reconnects %+v, boot_ids %v: want one blip, same boot", b.Reconnects, b.BootIDs)
	}
	if b.Reconnects[0].StaleAgent == "" || strings.Contains(b.Reconnects[0].StaleAgent, "SIGKILL") {
		t.Errorf("stale agent: %q; want the old agent stopped cleanly", b.Reconnects[0].StaleAgent)
	}
	evs, _ := os.ReadFile(evPath)
	if len(b.DeploySeconds) != 2 || bytes.Count(evs, []byte(`"kind":"hello"`)) != 2 {
		t.Errorf("deploys %v, %d agent hellos: want the agent run again after the blip", b.DeploySeconds, bytes.Count(evs, []byte(`"kind":"hello"`)))
	}
	con, _ := os.ReadFile(filepath.Join(filepath.Dir(evPath), "console.log"))
	seen, dups := map[string]bool{}, 0
	for _, l := range strings.Split(string(con), "\n") {
		if l != "" && seen[l] {
			dups++
		}
		seen[l] = true
	}
	if dups > 0 || len(seen) < 10 {
		t.Errorf("console.log: %d lines, %d of them twice: want the kernel log once, not its backlog again after the blip", len(seen), dups)
	}
	t.Logf("blip: %+v", b.Reconnects[0])
}

// boardIsClean checks that the stopped agent cleaned up after itself: no
// kprobe events, no function tracer left in the agent's tracefs instances,
// none of its modules loaded, and no ftrace ops left on any function. An
// agent killed before its clean-up leaves the first three behind (the
// kernel drops only its BPF links with its file descriptors).
func boardIsClean(t *testing.T, c *fthssh.Client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var dirty []string
		check := func(cmd string, bad func(string) bool) {
			b, err := c.Output(t.Context(), cmd)
			if err != nil {
				dirty = append(dirty, fmt.Sprintf("%s: %v", cmd, err))
			} else if bad(string(b)) {
				dirty = append(dirty, fmt.Sprintf("%s:\n%.1000s", cmd, b))
			}
		}
		nonEmpty := func(s string) bool { return strings.TrimSpace(s) != "" }
		check("cat /sys/kernel/tracing/kprobe_events", nonEmpty)
		check("cat /sys/kernel/tracing/enabled_functions", nonEmpty)
		check("ls /sys/kernel/tracing/instances", nonEmpty)
		check("cat /proc/modules", func(s string) bool {
			return strings.Contains(s, "fth_target") || strings.Contains(s, "ftrace_direct")
		})
		if len(dirty) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the board is not clean after the agent stopped:\n%s", strings.Join(dirty, "\n"))
			return
		}
		time.Sleep(2 * time.Second)
	}
}
