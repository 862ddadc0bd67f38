// Package soak runs a stress scenario on a real board over SSH for hours:
// it deploys the agent built for the board's arch, streams the kernel log
// (/dev/kmsg) into console.log and the live crash parser, reads the
// agent's events on their own SSH channel, and survives what boards do
// under stress — a panic that drops the connection and reboots the board,
// or a network blip — telling them apart by boot_id, collecting pstore
// records after a reboot, and optionally resuming.
package soak

import (
	"bytes"
	"compress/gzip"
	"context"
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
	"github.com/ftrace-harness/fth/harness/machine"
	"github.com/ftrace-harness/fth/harness/machine/ssh"
	"github.com/ftrace-harness/fth/harness/monitor"
	"github.com/ftrace-harness/fth/images"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// Config says what to soak.
type Config struct {
	// SSH reaches the board (its Addr names it).
	SSH ssh.Config
	// Duration is how long the stress runs in total, across resumes.
	Duration time.Duration
	// Agent are the agent's options (scenario=churn when not given); churn
	// is set to the time left on each (re)start.
	Agent options.Args
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
	// TimeoutScale multiplies the soak's waits, as an arch's does a cell's
	// (monitor.NewTimeouts): a board emulated by fth boardvm under TCG
	// runs slower than native. 0 is 1, a real board.
	TimeoutScale float64
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

// deadlineSlack is what the soak's overall deadline adds to Duration: time
// for the deploys and the reboots a soak survives.
const deadlineSlack = 30 * time.Minute

// defaultSilence is Config.Silence's default.
const defaultSilence = 2 * time.Minute

// Timeouts are the soak's waits, graces included, scaled once by
// TimeoutScale with the constructor that scales a cell's. The deadline is
// Duration, which the agent is told and keeps to on any target, plus the
// scaled slack.
func (c Config) Timeouts() monitor.Timeouts {
	silence := c.Silence
	if silence <= 0 {
		silence = defaultSilence
	}
	t := monitor.NewTimeouts(c.TimeoutScale, deadlineSlack, silence)
	t.Deadline += c.Duration
	return t
}

// Run soaks the board and records everything in w. The error is for a
// soak that could not start (unreachable board, failed build); what the
// kernel does is the verdict, which the monitor writes as for any cell.
func Run(ctx context.Context, w *results.CellWriter, cfg Config) error {
	if cfg.RemoteDir == "" {
		cfg.RemoteDir = "/tmp"
	}
	if !cfg.Agent.Has("scenario") {
		var err error
		if cfg.Agent, err = cfg.Agent.With("scenario", string(event.ScenarioChurn)); err != nil {
			return fmt.Errorf("soak: agent options: %w", err)
		}
	}
	agent := cfg.Agent.Options()
	log := cfg.Log
	s := &soak{cfg: cfg, w: w, log: log, start: time.Now()}
	c, err := ssh.Dial(ctx, cfg.SSH)
	if err != nil {
		return err
	}
	s.setClient(c)
	a, skip, err := s.probe(ctx)
	if err != nil {
		c.Close()
		return err
	}
	if skip != "" {
		c.Close()
		_ = w.Update(func(r *results.Result) {
			r.Verdict, r.Reason = results.Skip, skip
			r.EndedAt = time.Now().UTC()
		})
		return nil
	}
	s.arch = a
	b := newBoard(ctx, s)
	defer b.Close()
	err = monitor.Run(ctx, log, w, b, monitor.Spec{
		Timeouts:     cfg.Timeouts(),
		IncludeKnown: agent.IncludeKnown,
		// A board reboots after a panic, and the board target reports
		// the new boot with what pstore kept: the soak goes on.
		SurvivesPanic: true,
	})
	_ = w.Update(func(r *results.Result) {
		r.Timings.TotalSeconds = time.Since(s.start).Seconds()
		r.EndedAt = time.Now().UTC()
	})
	return err
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

	// emit hands an event to the monitor (see board).
	emit func(machine.Event)
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
		return arch.Arch{}, "", fmt.Errorf("probe %s: %w", s.cfg.SSH.Addr, err)
	}
	rel, err := out("uname -r")
	if err != nil {
		return arch.Arch{}, "", fmt.Errorf("probe %s: %w", s.cfg.SSH.Addr, err)
	}
	if s.bootID, err = c.BootID(ctx); err != nil {
		return arch.Arch{}, "", fmt.Errorf("probe %s: %w", s.cfg.SSH.Addr, err)
	}
	board := &results.Board{Target: s.cfg.SSH.Addr.String(), Uname: m, Release: rel, BootIDs: []string{s.bootID}}
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
		return "", fmt.Errorf("deploy agent to %s: %w", s.cfg.SSH.Addr, err)
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

// agentCommand is the remote command line: the board's own kernel command
// line is not ours (FTH_NO_CMDLINE), events go to stdout, and the agent
// stops when our session does.
func agentCommand(remote string, args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{"FTH_NO_CMDLINE=1", shell.Quote(remote), "session", "-events", "-", "-poweroff=false"}
	for _, k := range keys {
		parts = append(parts, shell.Quote("-"+k+"="+args[k]))
	}
	return strings.Join(parts, " ")
}

// kmsgCommand runs the deployed agent as the board's kernel log stream.
func kmsgCommand(remote string) string {
	return strings.Join([]string{"FTH_NO_CMDLINE=1", shell.Quote(remote), "kmsgstream"}, " ")
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
func (s *soak) collectPstore(ctx context.Context) []results.Finding {
	c := s.client()
	ls, err := c.Output(ctx, "ls /sys/fs/pstore")
	if err != nil {
		s.log.Info("no pstore on the board", "err", err)
		return nil
	}
	var all []results.Finding
	for _, name := range strings.Fields(string(ls)) {
		if strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			continue
		}
		b, err := c.Output(ctx, "cat "+shell.Quote("/sys/fs/pstore/"+name))
		if err != nil {
			continue
		}
		dst := s.w.Path(filepath.Join(results.PstoreDir, name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			_ = os.WriteFile(dst, b, 0o644)
		}
		_ = s.w.Update(func(r *results.Result) { r.Board.Pstore = append(r.Board.Pstore, results.PstoreDir+"/"+name) })
		for _, f := range console.Parse(b) {
			all = append(all, monitor.FromConsole("pstore", f))
		}
	}
	return all
}

// collectPrevBoot saves the previous boot's kernel log where the board
// keeps one (systemd's persistent journal) as prev-boot.log and runs the
// crash parser over it. Boards without journalctl, or with a volatile
// journal, have none: pstore is then the only record.
func (s *soak) collectPrevBoot(ctx context.Context) []results.Finding {
	b, err := s.client().Output(ctx, "journalctl -k -b -1 --no-pager -o short-monotonic")
	if err != nil || len(b) == 0 {
		s.log.Info("no previous-boot kernel log on the board", "err", err)
		return nil
	}
	if err := os.WriteFile(s.w.Path(results.PrevBootLog), b, 0o644); err != nil {
		s.log.Warn("save prev-boot.log", "err", err)
	}
	var fs []results.Finding
	for _, f := range console.Parse(b) {
		fs = append(fs, monitor.FromConsole("prev-boot", f))
	}
	return fs
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
