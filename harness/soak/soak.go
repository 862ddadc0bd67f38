// Package soak runs a stress scenario on a real board over SSH for hours:
// it deploys the agent built for the board's arch, streams the kernel log
// (/dev/kmsg) into console.log and the live crash parser, reads the
// agent's events on their own SSH channel, and survives what boards do
// under stress — a panic that drops the connection and reboots the board,
// or a network blip — telling them apart by boot_id, collecting pstore
// records after a reboot, and optionally resuming.
package soak

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/internal/shell"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/target/ssh"
	"github.com/ftrace-harness/fth/images"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/event"
)

// Config says what to soak.
type Config struct {
	// SSH reaches the board (its Target names it).
	SSH ssh.Config
	// Duration is how long the stress runs in total, across resumes.
	Duration time.Duration
	// AgentArgs are agent options (scenario=churn by default); churn is set
	// to the time left on each (re)start.
	AgentArgs map[string]string
	// Resume redeploys and continues after a reboot until Duration is
	// used up; without it the soak ends at the first reboot.
	Resume bool
	// CrashAfter, if set, panics the board (sysrq-c) this long into the
	// soak: how the harness's own reboot handling is tested.
	CrashAfter time.Duration
	// Silence is the heartbeat deadline: the agent reports liveness every
	// 2 s, so this long without an event while the connection is up is a
	// hang (default 2 min).
	Silence time.Duration
	// Backoff bounds waiting for a board to come back.
	Backoff ssh.Backoff
	// ModuleDir is the ftrace-harness checkout (to build the agent);
	// CacheDir holds built agents.
	ModuleDir, CacheDir string
	// RemoteDir is where the agent goes on the board (default /tmp).
	RemoteDir string
	Log       *slog.Logger
}

// required are the kernel options without which no scenario can run.
var required = []string{"BPF_SYSCALL", "DEBUG_INFO_BTF", "FUNCTION_TRACER", "DYNAMIC_FTRACE_WITH_DIRECT_CALLS"}

// Run soaks the board and records everything in w. The error is for a
// soak that could not start (unreachable board, failed build); what the
// kernel does is the verdict.
func Run(ctx context.Context, w *results.CellWriter, cfg Config) error {
	if cfg.Silence <= 0 {
		cfg.Silence = 2 * time.Minute
	}
	if cfg.RemoteDir == "" {
		cfg.RemoteDir = "/tmp"
	}
	if cfg.AgentArgs == nil {
		cfg.AgentArgs = map[string]string{}
	}
	if cfg.AgentArgs["scenario"] == "" {
		cfg.AgentArgs["scenario"] = "churn"
	}
	log := cfg.Log
	s := &soak{cfg: cfg, w: w, log: log, start: time.Now(), det: console.NewDetector()}
	var err error
	if s.con, err = results.CreateLineLog(w.Path("console.log")); err != nil {
		return err
	}
	defer s.con.Close()
	if s.ev, err = results.CreateLineLog(w.Path("events.jsonl")); err != nil {
		return err
	}
	defer s.ev.Close()

	c, err := ssh.Dial(ctx, cfg.SSH)
	if err != nil {
		return err
	}
	defer func() { s.client().Close() }()
	s.setClient(c)
	a, skip, err := s.probe(ctx)
	if err != nil {
		return err
	}
	if skip != "" {
		s.finish(results.Skip, skip)
		return nil
	}
	s.arch = a
	s.run(ctx)
	return nil
}

type soak struct {
	cfg   Config
	w     *results.CellWriter
	log   *slog.Logger
	start time.Time
	arch  arch.Arch

	mu     sync.Mutex
	c      *ssh.Client
	bootID string
	// agentPID is the pid the running agent reported in its hello.
	agentPID atomic.Int64
	// kmsgPID is the pid of the agent streaming the kernel log.
	kmsgPID atomic.Int64
	// kmsgNext is the sequence number of the first kernel log record not
	// yet consumed in this boot: after a blip the stream starts again from
	// the backlog, which is already in console.log and the detector.
	kmsgNext atomic.Uint64

	con, ev *results.LineLog
	detMu   sync.Mutex
	det     *console.Detector
	conLine int
}

func (s *soak) client() *ssh.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

func (s *soak) setClient(c *ssh.Client) {
	s.mu.Lock()
	s.c = c
	s.mu.Unlock()
}

// probe finds the board's arch, kernel and config, and decides whether
// the scenario can run there at all (skip non-empty says why not).
func (s *soak) probe(ctx context.Context) (arch.Arch, string, error) {
	c := s.client()
	out := func(cmd string) (string, error) {
		b, err := c.Output(ctx, cmd)
		return strings.TrimSpace(string(b)), err
	}
	m, err := out("uname -m")
	if err != nil {
		return arch.Arch{}, "", fmt.Errorf("probe %s: %w", s.cfg.SSH.Target, err)
	}
	rel, err := out("uname -r")
	if err != nil {
		return arch.Arch{}, "", fmt.Errorf("probe %s: %w", s.cfg.SSH.Target, err)
	}
	if s.bootID, err = c.BootID(ctx); err != nil {
		return arch.Arch{}, "", fmt.Errorf("probe %s: %w", s.cfg.SSH.Target, err)
	}
	board := &results.Board{Target: s.cfg.SSH.Target.String(), Uname: m, Release: rel, BootIDs: []string{s.bootID}}
	cfgText, where := s.kernelConfig(ctx, rel)
	board.Config = where
	var observed map[string]string
	var missing []string
	if cfgText != nil {
		final := kbuild.ParseConfig(cfgText)
		observed = kbuild.Observe(final)
		for _, sym := range required {
			if v := final[sym]; v != "y" {
				missing = append(missing, "CONFIG_"+sym)
			}
		}
	}
	a, err := arch.ByUname(m)
	// The harness's arch name ("arm64", not uname's "aarch64"), so a board
	// lands in the report's heatmap row of VM cells of that arch; Board.Uname
	// keeps what the board said.
	name := m
	if err == nil {
		name = string(a.Name)
	}
	_ = s.w.Update(func(r *results.Result) {
		r.Board = board
		r.Arch = name
		r.Kernel = results.Kernel{Release: rel, Observed: observed}
	})
	if err != nil {
		return arch.Arch{}, fmt.Sprintf("board arch: %v", err), nil
	}
	if len(missing) > 0 {
		return a, fmt.Sprintf("the board's kernel %s lacks %s (config from %s)", rel, strings.Join(missing, ", "), where), nil
	}
	s.log.Info("board", "target", board.Target, "arch", a.Name, "release", rel, "boot_id", s.bootID, "config", where)
	return a, "", nil
}

// kernelConfig reads the running kernel's config: /proc/config.gz
// (decompressed here, so the board needs no gzip), else
// /boot/config-<release>. nil and a reason when neither exists.
func (s *soak) kernelConfig(ctx context.Context, release string) ([]byte, string) {
	c := s.client()
	if gz, err := c.Output(ctx, "cat /proc/config.gz"); err == nil && len(gz) > 0 {
		if zr, err := gzip.NewReader(bytes.NewReader(gz)); err == nil {
			if b, err := io.ReadAll(zr); err == nil {
				return b, "/proc/config.gz"
			}
		}
	}
	p := "/boot/config-" + release
	if b, err := c.Output(ctx, "cat "+shell.Quote(p)); err == nil && len(b) > 0 {
		return b, p
	}
	return nil, "unavailable (no /proc/config.gz, no " + p + "): the agent reports what the kernel lacks"
}

// deploy builds the agent for the board and uploads it.
func (s *soak) deploy(ctx context.Context) (string, error) {
	t0 := time.Now()
	bin, err := buildAgent(ctx, s.cfg.ModuleDir, s.cfg.CacheDir, s.arch.GOARCH)
	if err != nil {
		return "", err
	}
	f, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer f.Close()
	remote := s.cfg.RemoteDir + "/fth-agent"
	if err := s.client().Upload(ctx, remote, f, 0o755); err != nil {
		return "", fmt.Errorf("deploy agent to %s: %w", s.cfg.SSH.Target, err)
	}
	d := time.Since(t0)
	s.log.Info("agent deployed", "remote", remote, "seconds", d.Seconds())
	_ = s.w.Update(func(r *results.Result) { r.Board.DeploySeconds = append(r.Board.DeploySeconds, d.Seconds()) })
	return remote, nil
}

// buildAgent builds the agent as a static binary for goarch, cached by the
// same content key as the initramfs (the agent's sources, go.sum, Go).
func buildAgent(ctx context.Context, moduleDir, cacheDir, goarch string) (string, error) {
	key, err := images.Key(ctx, images.Request{GOARCH: goarch, ModuleDir: moduleDir, CacheDir: cacheDir})
	if err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, "agents", goarch+"-"+key[:16], "agent")
	if st, err := os.Stat(out); err == nil && st.Size() > 0 {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out+".partial", images.AgentPackage)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build agent for %s: %w\n%s", goarch, err, b)
	}
	return out, os.Rename(out+".partial", out)
}

// segment is how one agent run on one connection ended.
type segment int

const (
	segDone        segment = iota // the agent reported done
	segLost                       // the connection dropped
	segHang                       // no agent output for Silence
	segInterrupted                // ctx ended
	segAgentExited                // the agent exited without done
)

// run deploys and runs the agent until the soak ends, handling lost
// connections, then records the verdict.
func (s *soak) run(ctx context.Context) {
	first := true
	var crashAt <-chan time.Time
	if s.cfg.CrashAfter > 0 {
		t := time.NewTimer(s.cfg.CrashAfter)
		defer t.Stop()
		crashAt = t.C
	}
	for {
		left := s.cfg.Duration - time.Since(s.start)
		if left <= 0 {
			s.verdict(segDone, "")
			return
		}
		remote, err := s.deploy(ctx)
		if err != nil {
			if ctx.Err() != nil {
				s.verdict(segInterrupted, "")
				return
			}
			s.finish(results.Error, err.Error())
			return
		}
		seg, why := s.segment(ctx, remote, left, first, &crashAt)
		first = false
		switch seg {
		case segLost:
			rebooted, back := s.comeback(ctx)
			if !back {
				return // comeback recorded the finding
			}
			if rebooted && !s.cfg.Resume {
				s.verdict(segDone, "")
				return
			}
			continue
		case segAgentExited:
			s.finish(results.Error, why)
			return
		default:
			s.verdict(seg, why)
			return
		}
	}
}

// segment runs the kmsg stream and one agent until the agent finishes, the
// connection drops, the agent goes silent, or ctx ends.
func (s *soak) segment(ctx context.Context, remote string, left time.Duration, first bool, crashAt *<-chan time.Time) (segment, string) {
	c := s.client()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// History: on the first connection the kernel log already holds the
	// boot and whatever ran before us; it goes to console.log but not to
	// the detector. After a reboot, the new boot is all ours.
	var since uint64
	if first {
		if up, err := c.Output(ctx, "cat /proc/uptime"); err == nil {
			if f := strings.Fields(string(up)); len(f) > 0 {
				if sec, err := strconv.ParseFloat(f[0], 64); err == nil {
					since = uint64(sec * 1e6)
				}
			}
		}
	}
	var wg sync.WaitGroup
	// The kernel log reader must be done before the caller resets the
	// log's numbering for a new boot; bounded, as a dead connection's
	// stream may be slow to notice.
	defer func() {
		cancel()
		waitTimeout(&wg, 10*time.Second)
	}()
	s.agentPID.Store(0)
	s.kmsgPID.Store(0)
	kr, kw := io.Pipe()
	// The agent streams the kernel log rather than `cat /dev/kmsg`: like
	// the stress, it stops when its stdin (a pipe never written) sees the
	// session drop. A cat would outlive a harness killed mid-soak on an
	// sshd that keeps its output pipe open (u-root's), blocked on writes.
	kin, kinW := io.Pipe()
	defer kinW.Close()
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := c.Stream(sctx, kmsgCommand(remote), kin, kw, io.Discard)
		kw.CloseWithError(err)
	}()
	go func() {
		defer wg.Done()
		s.consumeKmsg(kr, since)
	}()

	args := map[string]string{}
	for k, v := range s.cfg.AgentArgs {
		args[k] = v
	}
	if args["scenario"] == "churn" {
		args["churn"] = left.Round(time.Second).String()
	}
	cmd := agentCommand(remote, args)
	s.log.Info("starting agent", "cmd", cmd)
	ar, aw := io.Pipe()
	// The agent's stdin is a pipe we never write: it sees EOF only when the
	// session drops, and stops itself (stdinwatch).
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stderr bytes.Buffer
	agentErr := make(chan error, 1)
	go func() {
		err := c.Stream(sctx, cmd, stdinR, aw, &lockedWriter{w: &stderr})
		aw.CloseWithError(err)
		agentErr <- err
	}()
	events := make(chan event.Event, 64)
	go s.readEvents(ar, events)

	silence := time.NewTimer(s.cfg.Silence)
	defer silence.Stop()
	lost := c.Done()
	done := false
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			silence.Reset(s.cfg.Silence)
			if ev.Kind == event.KindDone {
				done = true
				// End the agent's stdin: an sshd that copies it into a
				// pipe (u-root's) waits for its end before it reports
				// the exit and closes the session.
				stdinW.Close()
			}
		case err := <-agentErr:
			if done {
				return segDone, ""
			}
			if errors.Is(err, ssh.ErrConnLost) {
				return segLost, err.Error()
			}
			select {
			case <-lost:
				return segLost, "connection lost"
			case <-time.After(2 * time.Second):
			}
			return segAgentExited, fmt.Sprintf("the agent exited without reporting done: %v; stderr: %s", err, tail(stderr.String(), 400))
		case <-lost:
			return segLost, "connection lost"
		case <-silence.C:
			return segHang, fmt.Sprintf("hang: no agent output for %s with the connection up", s.cfg.Silence)
		case <-*crashAt:
			*crashAt = nil
			s.log.Warn("injecting a board panic (sysrq-c), as asked", "after", s.cfg.CrashAfter)
			go func() {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				defer ccancel()
				_, _ = c.Output(cctx, "echo c > /proc/sysrq-trigger")
			}()
		case <-ctx.Done():
			return segInterrupted, ""
		}
	}
}

// agentCommand is the remote command line: the board's own kernel command
// line is not ours (FTH_NO_CMDLINE), events go to stdout, and the agent
// stops when our session does.
func agentCommand(remote string, args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{"FTH_NO_CMDLINE=1", shell.Quote(remote), "-events", "-", "-poweroff=false", "-stdinwatch"}
	for _, k := range keys {
		parts = append(parts, shell.Quote("-"+k+"="+args[k]))
	}
	return strings.Join(parts, " ")
}

// kmsgCommand runs the deployed agent as the board's kernel log stream.
func kmsgCommand(remote string) string {
	return strings.Join([]string{"FTH_NO_CMDLINE=1", shell.Quote(remote), "-kmsgstream"}, " ")
}

// consumeKmsg writes every kernel log record to console.log and feeds
// those after since (µs since boot) to the detector.
func (s *soak) consumeKmsg(r io.Reader, since uint64) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if pid, ok := strings.CutPrefix(sc.Text(), event.KmsgStreamPIDPrefix); ok {
			if n, err := strconv.ParseInt(pid, 10, 64); err == nil {
				s.kmsgPID.Store(n)
			}
			continue
		}
		rec, ok := parseKmsg(sc.Text())
		next := s.kmsgNext.Load()
		if !ok || rec.Seq < next {
			continue
		}
		if next > 0 && rec.Seq > next {
			// The ring buffer overwrote records before they were read
			// (a burst, or a blip): say so where they would have been.
			_ = s.con.Line(fmt.Sprintf("---- fth: %d kernel log records lost (overwritten before they were read) ----", rec.Seq-next))
		}
		s.kmsgNext.Store(rec.Seq + 1)
		line := rec.Line()
		_ = s.con.Line(line)
		if rec.TSus < since {
			continue
		}
		s.detMu.Lock()
		fs := s.det.Line(line)
		s.detMu.Unlock()
		s.addFindings("", fs)
	}
}

func (s *soak) addFindings(source string, fs []console.Finding) {
	if len(fs) == 0 {
		return
	}
	_ = s.w.Update(func(r *results.Result) {
		for _, f := range fs {
			s.log.Warn("kernel report", "title", f.Title, "source", source)
			r.Findings = append(r.Findings, results.Finding{
				Source: source, Kind: string(f.Kind), Title: f.Title, Function: f.Function,
				StartLine: f.StartLine, EndLine: f.EndLine, Report: f.Report, Stack: f.Stack,
			})
		}
	})
}

// readEvents writes the agent's event lines to events.jsonl, folds them
// into the result and passes them on.
func (s *soak) readEvents(r io.Reader, out chan<- event.Event) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		_ = s.ev.Line(line)
		var ev event.Event
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev.Kind {
		case event.KindHello:
			if ev.Hello != nil {
				s.agentPID.Store(int64(ev.Hello.PID))
			}
			_ = s.w.Update(func(r *results.Result) { results.Apply(r, ev) })
		case event.KindLog:
			s.log.Info("agent: " + ev.Log)
		case event.KindOp, event.KindProgress:
		default:
			_ = s.w.Update(func(r *results.Result) { results.Apply(r, ev) })
		}
		out <- ev
	}
}

// comeback waits for a lost board. rebooted: its boot_id changed; back:
// it answered at all. A reboot is a finding, with pstore's records.
func (s *soak) comeback(ctx context.Context) (rebooted, back bool) {
	at := time.Since(s.start).Seconds()
	s.log.Warn("connection to the board lost; waiting for it to come back", "target", s.cfg.SSH.Target)
	_ = s.client().Close()
	dial := func(ctx context.Context) (*ssh.Client, error) { return ssh.Dial(ctx, s.cfg.SSH) }
	c, cb, err := ssh.WaitBack(ctx, s.bootID, s.cfg.Backoff, dial, s.log)
	rc := results.Reconnect{At: at, Rebooted: cb.Rebooted, Back: err == nil, Tries: cb.Tries, Waited: cb.Waited.Seconds()}
	if err != nil {
		rc.Err = err.Error()
	}
	_ = s.w.Update(func(r *results.Result) { r.Board.Reconnects = append(r.Board.Reconnects, rc) })
	if err != nil {
		if ctx.Err() != nil {
			s.verdict(segInterrupted, "")
			return false, false
		}
		s.addFindings("board", []console.Finding{{Kind: "board-lost", Title: "board unreachable after a lost connection"}})
		s.finish(results.Fail, fmt.Sprintf("board unreachable after a lost connection: %v", err))
		return false, false
	}
	s.setClient(c)
	if !cb.Rebooted {
		s.log.Info("board back, same boot: a network blip", "waited", cb.Waited.Round(time.Second))
		stale := s.stopStaleAgent(ctx)
		_ = s.w.Update(func(r *results.Result) {
			r.Board.Reconnects[len(r.Board.Reconnects)-1].StaleAgent = stale
		})
		return false, true
	}
	s.log.Warn("board rebooted", "old_boot_id", s.bootID, "new_boot_id", cb.BootID, "waited", cb.Waited.Round(time.Second))
	s.bootID = cb.BootID
	s.kmsgNext.Store(0) // a new boot numbers its records from 0; the pids reset when the next segment starts
	_ = s.w.Update(func(r *results.Result) { r.Board.BootIDs = append(r.Board.BootIDs, cb.BootID) })
	fs := s.collectPstore(ctx)
	fs = append(fs, s.collectPrevBoot(ctx)...)
	if len(fs) == 0 {
		fs = []console.Finding{{Kind: "reboot", Title: "board rebooted during the soak (no pstore record)"}}
		s.addFindings("board", fs)
	}
	// The detector's state belongs to the boot that is gone.
	s.detMu.Lock()
	s.det = console.NewDetector()
	s.detMu.Unlock()
	_ = s.con.Line(fmt.Sprintf("---- fth: board rebooted (boot_id %s) ----", cb.BootID))
	return true, true
}

// staleWait bounds the wait for the agents of a dropped session to stop,
// past their own orphan guard (90 s).
const staleWait = 2 * time.Minute

// stopStaleAgent makes sure the agents of the session that dropped (the
// stress and the kernel log stream) are gone before others start, and says
// how it went. After a blip the old session is half open on the board
// until its TCP connection is reset; the agents then see their stdin close
// and stop by themselves. SIGTERM asks the same in case the reset is slow
// to come; SIGKILL is the last resort.
func (s *soak) stopStaleAgent(ctx context.Context) string {
	var notes []string
	for _, p := range []struct {
		what string
		pid  int64
	}{{"agent", s.agentPID.Load()}, {"kmsg stream", s.kmsgPID.Load()}} {
		if p.pid > 0 {
			notes = append(notes, p.what+" "+s.stopStale(ctx, p.pid))
		}
	}
	return strings.Join(notes, "; ")
}

// stopStale stops one stale agent process, see stopStaleAgent.
func (s *soak) stopStale(ctx context.Context, pid int64) string {
	c := s.client()
	// alive: the process is still an agent. A failed command is not
	// proof of anything (u-root's sshd sends no exit status for one), so
	// /proc is listed first, which always succeeds.
	alive := func() (bool, error) {
		ls, err := c.Output(ctx, "ls /proc")
		if err != nil {
			return false, err
		}
		if !slices.Contains(strings.Fields(string(ls)), strconv.FormatInt(pid, 10)) {
			return false, nil
		}
		b, err := c.Output(ctx, fmt.Sprintf("cat /proc/%d/cmdline", pid))
		select {
		case <-c.Done():
			return false, fmt.Errorf("connection lost: %w", err)
		default:
		}
		// A cat that failed lost the race with the process's exit.
		return err == nil && bytes.Contains(b, []byte("fth-agent")), nil
	}
	if ok, err := alive(); err != nil {
		return fmt.Sprintf("pid %d: could not check: %v", pid, err)
	} else if !ok {
		return fmt.Sprintf("pid %d had stopped by itself", pid)
	}
	t0 := time.Now()
	_, _ = c.Output(ctx, fmt.Sprintf("kill %d", pid))
	for time.Since(t0) < staleWait && ctx.Err() == nil {
		ok, err := alive()
		if err != nil {
			return fmt.Sprintf("pid %d: could not check after SIGTERM: %v", pid, err)
		}
		if !ok {
			d := time.Since(t0).Round(100 * time.Millisecond)
			s.log.Info("stale agent stopped", "pid", pid, "after", d)
			return fmt.Sprintf("pid %d stopped %s after SIGTERM", pid, d)
		}
		time.Sleep(time.Second)
	}
	if ctx.Err() != nil {
		return fmt.Sprintf("pid %d: SIGTERMed, then the soak was interrupted", pid)
	}
	_, _ = c.Output(ctx, fmt.Sprintf("kill -9 %d", pid))
	s.log.Warn("stale agent did not stop; killed", "pid", pid, "waited", staleWait)
	return fmt.Sprintf("pid %d still ran %s after SIGTERM; SIGKILLed (its tracers may be left on)", pid, staleWait)
}

// waitTimeout waits for wg, or d at most.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// collectPstore saves the pstore records of the crash that rebooted the
// board under pstore/ and runs the crash parser over them.
func (s *soak) collectPstore(ctx context.Context) []console.Finding {
	c := s.client()
	ls, err := c.Output(ctx, "ls /sys/fs/pstore")
	if err != nil {
		s.log.Info("no pstore on the board", "err", err)
		return nil
	}
	var all []console.Finding
	for _, name := range strings.Fields(string(ls)) {
		if strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			continue
		}
		b, err := c.Output(ctx, "cat "+shell.Quote("/sys/fs/pstore/"+name))
		if err != nil {
			continue
		}
		dst := s.w.Path(filepath.Join("pstore", name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			_ = os.WriteFile(dst, b, 0o644)
		}
		_ = s.w.Update(func(r *results.Result) { r.Board.Pstore = append(r.Board.Pstore, "pstore/"+name) })
		fs := console.Parse(b)
		s.addFindings("pstore", fs)
		all = append(all, fs...)
	}
	return all
}

// collectPrevBoot saves the previous boot's kernel log where the board
// keeps one (systemd's persistent journal) as prev-boot.log and runs the
// crash parser over it. Boards without journalctl, or with a volatile
// journal, have none: pstore is then the only record.
func (s *soak) collectPrevBoot(ctx context.Context) []console.Finding {
	b, err := s.client().Output(ctx, "journalctl -k -b -1 --no-pager -o short-monotonic")
	if err != nil || len(b) == 0 {
		s.log.Info("no previous-boot kernel log on the board", "err", err)
		return nil
	}
	if err := os.WriteFile(s.w.Path("prev-boot.log"), b, 0o644); err != nil {
		s.log.Warn("save prev-boot.log", "err", err)
	}
	fs := console.Parse(b)
	s.addFindings("prev-boot", fs)
	return fs
}

// verdict ends the soak from how its last segment ended.
func (s *soak) verdict(seg segment, why string) {
	r := s.w.Result()
	switch {
	case seg == segInterrupted:
		s.finish(results.Error, "interrupted")
	case len(r.Findings) > 0:
		s.finish(results.Fail, r.Findings[0].Title)
	case seg == segHang:
		s.addFindings("board", []console.Finding{{Kind: "hang", Title: why}})
		s.finish(results.Fail, why)
	default:
		if o, ok := results.FailedOracle(r.Oracles); ok {
			s.finish(results.Fail, o)
			return
		}
		if r.Liveness != nil && len(r.Liveness.Stalled) > 0 {
			s.finish(results.Fail, fmt.Sprintf("liveness: %d hammer thread(s) stalled", len(r.Liveness.Stalled)))
			return
		}
		if r.AgentOK != nil && !*r.AgentOK {
			s.finish(results.Fail, "agent: "+r.AgentReason)
			return
		}
		s.finish(results.Pass, "")
	}
}

func (s *soak) finish(v results.Verdict, reason string) {
	_ = s.w.Update(func(r *results.Result) {
		r.Verdict, r.Reason = v, reason
		r.Timings.GuestSeconds = time.Since(s.start).Seconds()
		r.Timings.TotalSeconds = time.Since(s.start).Seconds()
		r.EndedAt = time.Now().UTC()
	})
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
