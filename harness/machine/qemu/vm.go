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

// VM is one QEMU process with its QMP, serial console and agent
// connections: what QEMU itself can do and tell. Instance is the
// machine.Instance on top of it.
type VM struct {
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
// Close the VM; cancelling ctx also kills QEMU.
func Start(ctx context.Context, log *slog.Logger, cfg Config) (*VM, error) {
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
	vm := &VM{cfg: cfg, cmd: cmd, console: console, keys: keys, log: log, stderr: stderr, exited: make(chan struct{}), reset: make(chan struct{})}
	go func() {
		vm.exitErr = cmd.Wait()
		close(vm.exited)
	}()
	if err := vm.connect(ctx); err != nil {
		vm.Kill()
		<-vm.exited
		return nil, fmt.Errorf("%w: %v; qemu stderr: %s", ErrQEMU, err, strings.TrimSpace(stderr.String()))
	}
	return vm, nil
}

func (vm *VM) connect(ctx context.Context) error {
	// The agent chardev has wait=on: QEMU blocks before starting the guest until
	// this connection exists.
	c, err := vm.dialRetry(ctx, vm.cfg.AgentSocket())
	if err != nil {
		return fmt.Errorf("agent socket: %v", err)
	}
	vm.agent = c
	if vm.cfg.Race {
		// QEMU creates the race socket after the agent's wait=on socket
		// has its client: it may not be there yet.
		c, err := vm.dialRetry(ctx, vm.cfg.RaceSocket())
		if err != nil {
			return fmt.Errorf("race socket: %v", err)
		}
		vm.race = c
	}
	mon, err := qmp.NewSocketMonitor("unix", vm.cfg.QMPSocket(), 5*time.Second)
	if err != nil {
		return fmt.Errorf("qmp dial: %v", err)
	}
	if err := mon.Connect(); err != nil {
		return fmt.Errorf("qmp handshake: %v", err)
	}
	vm.mon = mon
	// go-qemu's event channel is unbuffered and its reader blocks on it: drain it
	// or every later command stalls.
	events, err := mon.Events(ctx)
	if err != nil {
		// Without events a guest poweroff leaves QEMU paused, and the caller
		// sees a silent guest instead of an exit: say why up front.
		vm.log.Warn("qmp events unavailable: a guest poweroff will look like a hang", "err", err)
		return nil
	}
	go func() {
		for ev := range events {
			vm.log.Debug("qmp event", "event", ev.Event, "data", ev.Data)
			if ev.Event == "SHUTDOWN" {
				reason, _ := ev.Data["reason"].(string)
				vm.onShutdown(reason)
			}
		}
	}()
	return nil
}

// dialRetry connects to one of QEMU's server sockets, waiting up to 15 s
// for QEMU to create it.
func (vm *VM) dialRetry(ctx context.Context, path string) (net.Conn, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			return c, nil
		}
		select {
		case <-vm.exited:
			return nil, fmt.Errorf("exited before opening %s: %v", path, vm.exitErr)
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
// console output at all) keeps its registers for CPUState, and an orderly
// poweroff is turned into the exit that -no-reboot used to give.
func (vm *VM) onShutdown(reason string) {
	vm.shutdown.Store(&reason)
	if vm.cfg.Reboot {
		return
	}
	switch reason {
	case "guest-reset", "guest-panic":
		vm.resetOnce.Do(func() { close(vm.reset) })
	case "guest-shutdown":
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if _, err := vm.run(ctx, qmp.Command{Execute: "quit"}); err != nil {
				vm.log.Debug("quit after guest poweroff", "err", err)
				vm.Kill()
			}
		}()
	}
}

// GuestReset is closed when the guest reset or panicked the machine itself
// (QMP SHUTDOWN with reason guest-reset or guest-panic) on a VM without
// Config.Reboot. QEMU then holds the guest paused, registers intact, until
// Close: CPUState first.
func (vm *VM) GuestReset() <-chan struct{} { return vm.reset }

// TripleFault reports whether QEMU logged an x86 triple fault: the reset a
// guest gets when a fault hits while its double-fault handler runs, and
// which leaves nothing on the console.
func (vm *VM) TripleFault() bool {
	b, err := os.ReadFile(vm.cfg.ResetLog())
	return err == nil && bytes.Contains(b, []byte("Triple fault"))
}

// ShutdownReason is the reason of QMP's last SHUTDOWN event ("guest-reset",
// "guest-shutdown", "host-qmp-quit", ...), or "" if there was none.
func (vm *VM) ShutdownReason() string {
	if r := vm.shutdown.Load(); r != nil {
		return *r
	}
	return ""
}

// Console returns QEMU's stdout, which carries the guest serial console.
func (vm *VM) Console() io.Reader { return vm.console }

// Agent returns the agent channel.
func (vm *VM) Agent() io.Reader { return vm.agent }

// RaceChannel is the race control port (Config.Race), nil without it.
func (vm *VM) RaceChannel() io.ReadWriter {
	if vm.race == nil {
		return nil
	}
	return vm.race
}

// DialGDB connects to the VM's gdbstub (Config.Race). The VM stops while
// the connection is made; the caller resumes it.
func (vm *VM) DialGDB(ctx context.Context) (*gdbstub.Conn, error) {
	if !vm.cfg.Race {
		return nil, fmt.Errorf("%w: the VM has no gdbstub (Config.Race unset)", ErrQEMU)
	}
	return gdbstub.Dial(ctx, "unix", vm.cfg.GDBSocket())
}

// Exited is closed when QEMU has exited.
func (vm *VM) Exited() <-chan struct{} { return vm.exited }

// ExitError is QEMU's exit status, valid after Exited is closed.
func (vm *VM) ExitError() error { return vm.exitErr }

// Stderr returns the last few KiB QEMU wrote to stderr.
func (vm *VM) Stderr() string { return vm.stderr.String() }

// Config returns the configuration the VM was started with.
func (vm *VM) Config() Config { return vm.cfg }

func (vm *VM) run(ctx context.Context, cmd qmp.Command) ([]byte, error) {
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
		out, err := vm.mon.Run(b)
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
func (vm *VM) Status(ctx context.Context) (string, error) {
	out, err := vm.run(ctx, qmp.Command{Execute: "query-status"})
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
func (vm *VM) HMP(ctx context.Context, command string) (string, error) {
	out, err := vm.run(ctx, qmp.Command{Execute: "human-monitor-command", Args: map[string]string{"command-line": command}})
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

// CPUState returns, as text, what QEMU can tell about a guest that stopped
// talking: its run state, every vCPU's registers, and the top of every
// vCPU's stack. It stops a guest that still runs; callers kill it
// afterwards.
func (vm *VM) CPUState(ctx context.Context) string {
	var b strings.Builder
	if st, err := vm.Status(ctx); err == nil {
		fmt.Fprintf(&b, "status: %s\n\n", st)
		// A guest that still runs would move on between the registers and
		// each vCPU's stack: stop it first, so that they agree.
		if st == "running" {
			if err := vm.Pause(ctx); err != nil {
				fmt.Fprintf(&b, "stop for the dump: %v\n\n", err)
			}
		}
	} else {
		fmt.Fprintf(&b, "status: %v\n\n", err)
	}
	regs, err := vm.HMP(ctx, "info registers -a")
	if err != nil {
		fmt.Fprintf(&b, "info registers -a: %v\n", err)
	} else {
		b.WriteString(regs)
		b.WriteString(vm.stacks(ctx, regs))
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
func (vm *VM) Sysrq(ctx context.Context, key byte) error {
	if _, err := vm.run(ctx, qmp.Command{Execute: "chardev-send-break", Args: map[string]any{"id": ConsoleID}}); err != nil {
		return fmt.Errorf("sysrq %c: %w", key, err)
	}
	// The UART raises the break and the byte as two receive events: a
	// short gap keeps them apart in the kernel's eyes.
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if _, err := vm.keys.Write([]byte{key}); err != nil {
		return fmt.Errorf("sysrq %c: write the key to the console: %w", key, err)
	}
	return nil
}

// Pause stops every vCPU (QMP stop), as a hang would.
func (vm *VM) Pause(ctx context.Context) error {
	_, err := vm.run(ctx, qmp.Command{Execute: "stop"})
	return err
}

// NetDev is the id of the user-mode network backend of a VM with SSHPort.
const NetDev = "net0"

// SetLink takes the VM's network link down or up (QMP set_link), as a
// cable pulled and put back: the guest keeps running and keeps its boot,
// and connections through the port forward stall until the link is up.
func (vm *VM) SetLink(ctx context.Context, up bool) error {
	if vm.cfg.SSHPort == 0 {
		return fmt.Errorf("set_link: the VM has no network")
	}
	_, err := vm.run(ctx, qmp.Command{Execute: "set_link", Args: map[string]any{"name": NetDev, "up": up}})
	return err
}

// Kill ends QEMU's process group at once.
func (vm *VM) Kill() { proc.KillGroup(vm.cmd) }

// Close asks QEMU to quit over QMP, and kills it if it has not exited within a
// few seconds. It always leaves no QEMU process behind.
func (vm *VM) Close() error {
	vm.once.Do(func() {
		select {
		case <-vm.exited:
		default:
			if vm.mon != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = vm.run(ctx, qmp.Command{Execute: "quit"})
				cancel()
			}
			select {
			case <-vm.exited:
			case <-time.After(3 * time.Second):
				vm.Kill()
				<-vm.exited
			}
		}
		if vm.mon != nil {
			_ = vm.mon.Disconnect()
		}
		if vm.agent != nil {
			_ = vm.agent.Close()
		}
		if vm.race != nil {
			_ = vm.race.Close()
			_ = os.Remove(vm.cfg.RaceSocket())
			_ = os.Remove(vm.cfg.GDBSocket())
		}
		_ = os.Remove(vm.cfg.QMPSocket())
		_ = os.Remove(vm.cfg.AgentSocket())
		_ = os.Remove(vm.cfg.ResetLog())
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
