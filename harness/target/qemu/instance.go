package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/digitalocean/go-qemu/qmp"

	"github.com/ftrace-harness/fth/harness/gdbstub"
	"github.com/ftrace-harness/fth/harness/internal/proc"
)

// ErrQEMU is wrapped by every failure to start or talk to QEMU: an
// infrastructure error, not a kernel finding.
var ErrQEMU = errors.New("qemu")

// Instance is one running VM.
type Instance struct {
	cfg     Config
	cmd     *exec.Cmd
	console io.ReadCloser
	// keys is the serial console's input: a sysrq is a break (QMP) and then
	// the key's byte, as on a real serial line.
	keys  io.WriteCloser
	agent net.Conn
	// race is the race control port's socket (Config.Race), nil otherwise.
	race   net.Conn
	mon    *qmp.SocketMonitor
	log    *slog.Logger
	stderr *tailBuffer

	exited  chan struct{}
	exitErr error
	once    sync.Once

	// reset is closed when the guest reset itself and QEMU holds it paused
	// (Config.Reboot unset): see GuestReset.
	reset     chan struct{}
	resetOnce sync.Once
	shutdown  atomic.Pointer[string]
}

// Start launches QEMU and connects the agent channel and QMP. The caller must
// Close the instance; cancelling ctx also kills QEMU.
func Start(ctx context.Context, log *slog.Logger, cfg Config) (*Instance, error) {
	if cfg.Accel == AccelAuto || cfg.Accel == "" {
		return nil, fmt.Errorf("%w: accelerator not resolved (probe first)", ErrQEMU)
	}
	// In the toolchain root, bin is bwrap: it shares QEMU's process group
	// (no --new-session), so a cancel or Kill signals both, and it dies
	// with fth and takes QEMU with it (proc's Pdeathsig, --die-with-parent).
	bin, args, err := cfg.Command()
	if err != nil {
		return nil, err
	}
	cmd := proc.Command(ctx, 5*time.Second, bin, args...)
	console, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	keys, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrQEMU, bin, err)
	}
	inst := &Instance{cfg: cfg, cmd: cmd, console: console, keys: keys, log: log, stderr: stderr, exited: make(chan struct{}), reset: make(chan struct{})}
	go func() {
		inst.exitErr = cmd.Wait()
		close(inst.exited)
	}()
	if err := inst.connect(ctx); err != nil {
		inst.Kill()
		<-inst.exited
		return nil, fmt.Errorf("%w: %v; qemu stderr: %s", ErrQEMU, err, strings.TrimSpace(stderr.String()))
	}
	return inst, nil
}

func (i *Instance) connect(ctx context.Context) error {
	// The agent chardev has wait=on: QEMU blocks before starting the guest until
	// this connection exists.
	c, err := i.dialRetry(ctx, i.cfg.AgentSocket())
	if err != nil {
		return fmt.Errorf("agent socket: %v", err)
	}
	i.agent = c
	if i.cfg.Race {
		// QEMU creates the race socket after the agent's wait=on socket
		// has its client: it may not be there yet.
		c, err := i.dialRetry(ctx, i.cfg.RaceSocket())
		if err != nil {
			return fmt.Errorf("race socket: %v", err)
		}
		i.race = c
	}
	mon, err := qmp.NewSocketMonitor("unix", i.cfg.QMPSocket(), 5*time.Second)
	if err != nil {
		return fmt.Errorf("qmp dial: %v", err)
	}
	if err := mon.Connect(); err != nil {
		return fmt.Errorf("qmp handshake: %v", err)
	}
	i.mon = mon
	// go-qemu's event channel is unbuffered and its reader blocks on it: drain it
	// or every later command stalls.
	events, err := mon.Events(ctx)
	if err != nil {
		// Without events a guest poweroff leaves QEMU paused, and the caller
		// sees a silent guest instead of an exit: say why up front.
		i.log.Warn("qmp events unavailable: a guest poweroff will look like a hang", "err", err)
		return nil
	}
	go func() {
		for ev := range events {
			i.log.Debug("qmp event", "event", ev.Event, "data", ev.Data)
			if ev.Event == "SHUTDOWN" {
				reason, _ := ev.Data["reason"].(string)
				i.onShutdown(reason)
			}
		}
	}()
	return nil
}

// dialRetry connects to one of QEMU's server sockets, waiting up to 15 s
// for QEMU to create it.
func (i *Instance) dialRetry(ctx context.Context, path string) (net.Conn, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			return c, nil
		}
		select {
		case <-i.exited:
			return nil, fmt.Errorf("exited before opening %s: %v", path, i.exitErr)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not appear within 15s: %v", path, err)
		}
	}
}

// onShutdown acts on QMP's SHUTDOWN event. Without Config.Reboot, QEMU runs
// with shutdown=pause, so every guest shutdown stops the vCPUs where they
// are: a reset the guest did not announce (an x86 triple fault leaves no
// console output at all) keeps its registers for Diagnose, and an orderly
// poweroff is turned into the exit that -no-reboot used to give.
func (i *Instance) onShutdown(reason string) {
	i.shutdown.Store(&reason)
	if i.cfg.Reboot {
		return
	}
	switch reason {
	case "guest-reset", "guest-panic":
		i.resetOnce.Do(func() { close(i.reset) })
	case "guest-shutdown":
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if _, err := i.run(ctx, qmp.Command{Execute: "quit"}); err != nil {
				i.log.Debug("quit after guest poweroff", "err", err)
				i.Kill()
			}
		}()
	}
}

// GuestReset is closed when the guest reset or panicked the machine itself
// (QMP SHUTDOWN with reason guest-reset or guest-panic) on a VM without
// Config.Reboot. QEMU then holds the guest paused, registers intact, until
// Close: Diagnose first.
func (i *Instance) GuestReset() <-chan struct{} { return i.reset }

// TripleFault reports whether QEMU logged an x86 triple fault: the reset a
// guest gets when a fault hits while its double-fault handler runs, and
// which leaves nothing on the console.
func (i *Instance) TripleFault() bool {
	b, err := os.ReadFile(i.cfg.ResetLog())
	return err == nil && bytes.Contains(b, []byte("Triple fault"))
}

// ShutdownReason is the reason of QMP's last SHUTDOWN event ("guest-reset",
// "guest-shutdown", "host-qmp-quit", ...), or "" if there was none.
func (i *Instance) ShutdownReason() string {
	if r := i.shutdown.Load(); r != nil {
		return *r
	}
	return ""
}

// Console returns QEMU's stdout, which carries the guest serial console.
func (i *Instance) Console() io.Reader { return i.console }

// Agent returns the agent channel.
func (i *Instance) Agent() io.Reader { return i.agent }

// RaceChannel is the race control port (Config.Race), nil without it.
func (i *Instance) RaceChannel() io.ReadWriter {
	if i.race == nil {
		return nil
	}
	return i.race
}

// DialGDB connects to the VM's gdbstub (Config.Race). The VM stops while
// the connection is made; the caller resumes it.
func (i *Instance) DialGDB(ctx context.Context) (*gdbstub.Conn, error) {
	if !i.cfg.Race {
		return nil, fmt.Errorf("%w: the VM has no gdbstub (Config.Race unset)", ErrQEMU)
	}
	return gdbstub.Dial(ctx, "unix", i.cfg.GDBSocket())
}

// Exited is closed when QEMU has exited.
func (i *Instance) Exited() <-chan struct{} { return i.exited }

// ExitError is QEMU's exit status, valid after Exited is closed.
func (i *Instance) ExitError() error { return i.exitErr }

// Stderr returns the last few KiB QEMU wrote to stderr.
func (i *Instance) Stderr() string { return i.stderr.String() }

// Config returns the configuration the VM was started with.
func (i *Instance) Config() Config { return i.cfg }

func (i *Instance) run(ctx context.Context, cmd qmp.Command) ([]byte, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	type result struct {
		out []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		out, err := i.mon.Run(b)
		ch <- result{out, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%w: qmp %s: %v", ErrQEMU, cmd.Execute, r.err)
		}
		return r.out, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: qmp %s: %v", ErrQEMU, cmd.Execute, ctx.Err())
	}
}

// Status returns QMP query-status's status, e.g. "running" or "paused".
func (i *Instance) Status(ctx context.Context) (string, error) {
	out, err := i.run(ctx, qmp.Command{Execute: "query-status"})
	if err != nil {
		return "", err
	}
	var r struct {
		Return struct {
			Status string `json:"status"`
		} `json:"return"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "", fmt.Errorf("%w: query-status reply %q: %v", ErrQEMU, out, err)
	}
	return r.Return.Status, nil
}

// HMP runs a human monitor command and returns its text output.
func (i *Instance) HMP(ctx context.Context, command string) (string, error) {
	out, err := i.run(ctx, qmp.Command{Execute: "human-monitor-command", Args: map[string]string{"command-line": command}})
	if err != nil {
		return "", err
	}
	var r struct {
		Return string `json:"return"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "", fmt.Errorf("%w: %s reply: %v", ErrQEMU, command, err)
	}
	return r.Return, nil
}

// Diagnose returns what QEMU can tell about a guest that stopped talking: its
// run state, every vCPU's registers, and the top of every vCPU's stack. It
// stops a guest that still runs; callers kill it afterwards.
func (i *Instance) Diagnose(ctx context.Context) string {
	var b strings.Builder
	if st, err := i.Status(ctx); err == nil {
		fmt.Fprintf(&b, "status: %s\n\n", st)
		// A guest that still runs would move on between the registers and
		// each vCPU's stack: stop it first, so that they agree.
		if st == "running" {
			if err := i.Pause(ctx); err != nil {
				fmt.Fprintf(&b, "stop for the dump: %v\n\n", err)
			}
		}
	} else {
		fmt.Fprintf(&b, "status: %v\n\n", err)
	}
	regs, err := i.HMP(ctx, "info registers -a")
	if err != nil {
		fmt.Fprintf(&b, "info registers -a: %v\n", err)
	} else {
		b.WriteString(regs)
		b.WriteString(i.stacks(ctx, regs))
	}
	return b.String()
}

// ConsoleID is the QEMU chardev id of the serial console.
const ConsoleID = "con0"

// Sysrq sends a magic sysrq to the guest the way a serial line does: a
// break (QMP chardev-send-break) followed by the key within the kernel's
// five seconds. It needs a kernel with MAGIC_SYSRQ_SERIAL (the base
// fragment) and a console UART that passes breaks on (8250, PL011); it
// works while user space is starved, since the kernel handles it in the
// UART's interrupt.
func (i *Instance) Sysrq(ctx context.Context, key byte) error {
	if _, err := i.run(ctx, qmp.Command{Execute: "chardev-send-break", Args: map[string]any{"id": ConsoleID}}); err != nil {
		return fmt.Errorf("sysrq %c: %w", key, err)
	}
	// The UART raises the break and the byte as two receive events: a
	// short gap keeps them apart in the kernel's eyes.
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if _, err := i.keys.Write([]byte{key}); err != nil {
		return fmt.Errorf("sysrq %c: write the key to the console: %w", key, err)
	}
	return nil
}

// Pause stops every vCPU (QMP stop), as a hang would.
func (i *Instance) Pause(ctx context.Context) error {
	_, err := i.run(ctx, qmp.Command{Execute: "stop"})
	return err
}

// NetDev is the id of the user-mode network backend of a VM with SSHPort.
const NetDev = "net0"

// SetLink takes the VM's network link down or up (QMP set_link), as a
// cable pulled and put back: the guest keeps running and keeps its boot,
// and connections through the port forward stall until the link is up.
func (i *Instance) SetLink(ctx context.Context, up bool) error {
	if i.cfg.SSHPort == 0 {
		return fmt.Errorf("set_link: the VM has no network")
	}
	_, err := i.run(ctx, qmp.Command{Execute: "set_link", Args: map[string]any{"name": NetDev, "up": up}})
	return err
}

// Kill ends QEMU's process group at once.
func (i *Instance) Kill() { proc.KillGroup(i.cmd) }

// Close asks QEMU to quit over QMP, and kills it if it has not exited within a
// few seconds. It always leaves no QEMU process behind.
func (i *Instance) Close() error {
	i.once.Do(func() {
		select {
		case <-i.exited:
		default:
			if i.mon != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = i.run(ctx, qmp.Command{Execute: "quit"})
				cancel()
			}
			select {
			case <-i.exited:
			case <-time.After(3 * time.Second):
				i.Kill()
				<-i.exited
			}
		}
		if i.mon != nil {
			_ = i.mon.Disconnect()
		}
		if i.agent != nil {
			_ = i.agent.Close()
		}
		if i.race != nil {
			_ = i.race.Close()
			_ = os.Remove(i.cfg.RaceSocket())
			_ = os.Remove(i.cfg.GDBSocket())
		}
		_ = os.Remove(i.cfg.QMPSocket())
		_ = os.Remove(i.cfg.AgentSocket())
		_ = os.Remove(i.cfg.ResetLog())
	})
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
