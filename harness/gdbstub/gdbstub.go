// Package gdbstub is a client of QEMU's gdbstub: the GDB remote serial
// protocol, in all-stop mode, over the socket QEMU's -gdb option opens. It
// knows only what the race injection needs: breakpoints, resuming some vCPUs
// while others stay stopped (vCont), stepping one vCPU, and reading
// registers and memory. No gdb binary is involved.
//
// QEMU's conventions, read from its gdbstub and relied on here:
//   - A client that connects stops the whole VM; Detach (or Close) lets it
//     run again.
//   - Thread ids are vCPU index + 1 unless the client offers the
//     multiprocess extension, which this client does not.
//   - Under TCG a hardware (Z1) and a software (Z0) breakpoint are the same
//     thing: a check at translation time, on every vCPU, that never writes
//     guest memory. So a breakpoint cannot race with the kernel patching
//     the same bytes.
//   - When any vCPU stops (breakpoint, step, interrupt) every vCPU stops;
//     vCont then resumes exactly the ones it names.
//   - Any byte sent while the VM runs stops it (Interrupt).
package gdbstub

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrProtocol is wrapped by every answer the client did not expect.
var ErrProtocol = errors.New("gdbstub protocol")

// ErrUnsupported is wrapped when the stub answers a request with the empty
// packet: it does not implement it.
var ErrUnsupported = errors.New("gdbstub: not supported")

// BreakKind selects the Z packet type.
type BreakKind int

const (
	// Software is Z0. Under TCG it writes no guest memory either.
	Software BreakKind = 0
	// Hardware is Z1.
	Hardware BreakKind = 1
)

// Stop is a stop reply: why the VM stopped and on which vCPU.
type Stop struct {
	// Signal is the GDB signal number: 5 (SIGTRAP) for a breakpoint or a
	// step, 2 (SIGINT) for an Interrupt.
	Signal int
	// Thread is the reporting vCPU's thread id (vCPU index + 1); 0 when
	// the reply named none.
	Thread int
	// Exited is set for a W or X reply: the VM is gone.
	Exited bool
	// Raw is the reply as sent.
	Raw string
}

// CPU is the vCPU index of Thread (-1 when no thread was named).
func (s Stop) CPU() int { return s.Thread - 1 }

// Conn is one connection to a gdbstub. Its methods must not be called
// concurrently, except Close, and Interrupt while a Wait is blocked.
type Conn struct {
	c    net.Conn
	r    *bufio.Reader
	wmu  sync.Mutex
	ack  bool
	once sync.Once
	// running is set between a resume and the stop reply that ends it.
	running bool
}

// Dial connects to the gdbstub at addr ("unix" sockets from -gdb
// unix:PATH,server=on,wait=off, or "tcp"), turns acknowledgements off, and
// returns with the VM stopped (QEMU stops it on connect).
func Dial(ctx context.Context, network, addr string) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("gdbstub: dial %s: %w", addr, err)
	}
	c := &Conn{c: nc, r: bufio.NewReader(nc), ack: true}
	if err := c.handshake(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) handshake(ctx context.Context) error {
	if _, err := c.Request(ctx, "qSupported:swbreak+;hwbreak+;vContSupported+"); err != nil {
		return fmt.Errorf("gdbstub: qSupported: %w", err)
	}
	if reply, err := c.Request(ctx, "QStartNoAckMode"); err == nil && reply == "OK" {
		c.ack = false
	}
	vcont, err := c.Request(ctx, "vCont?")
	if err != nil {
		return fmt.Errorf("gdbstub: vCont?: %w", err)
	}
	if !strings.Contains(vcont, ";c") || !strings.Contains(vcont, ";s") {
		return fmt.Errorf("%w: vCont? answered %q; partial resume needs vCont c and s", ErrUnsupported, vcont)
	}
	// QEMU answers single-register reads (p) only for a client that has
	// read the target description: gdb's way of learning the numbering.
	if err := c.readTargetXML(ctx); err != nil {
		return err
	}
	// The stop reason also tells the stub which vCPU later g/p/m use.
	if _, err := c.Request(ctx, "?"); err != nil {
		return fmt.Errorf("gdbstub: ?: %w", err)
	}
	return nil
}

// readTargetXML reads target.xml to its end and throws it away.
func (c *Conn) readTargetXML(ctx context.Context) error {
	for off := 0; ; {
		reply, err := c.Request(ctx, fmt.Sprintf("qXfer:features:read:target.xml:%x,%x", off, 0x1000))
		if err != nil {
			return fmt.Errorf("gdbstub: target.xml: %w", err)
		}
		switch reply[0] {
		case 'l':
			return nil
		case 'm':
			off += len(reply) - 1
		default:
			return fmt.Errorf("%w: target.xml answered %q", ErrProtocol, short(reply))
		}
	}
}

// Close ends the connection. QEMU lets the VM run on when its client goes.
func (c *Conn) Close() error {
	var err error
	c.once.Do(func() { err = c.c.Close() })
	return err
}

// Detach asks the stub to let the VM run and forget this client.
func (c *Conn) Detach(ctx context.Context) error {
	_, err := c.Request(ctx, "D")
	return err
}

func checksum(s string) byte {
	var sum byte
	for i := 0; i < len(s); i++ {
		sum += s[i]
	}
	return sum
}

// escape applies the protocol's binary escape to payload characters that
// would end or corrupt a packet.
func escape(s string) string {
	if !strings.ContainsAny(s, "#$}*") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '#', '$', '}', '*':
			b.WriteByte('}')
			b.WriteByte(ch ^ 0x20)
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

func (c *Conn) deadline(ctx context.Context) {
	if d, ok := ctx.Deadline(); ok {
		_ = c.c.SetDeadline(d)
	} else {
		_ = c.c.SetDeadline(time.Time{})
	}
}

// send writes one packet and, in ack mode, waits for its '+'.
func (c *Conn) send(ctx context.Context, payload string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.deadline(ctx)
	body := escape(payload)
	pkt := fmt.Sprintf("$%s#%02x", body, checksum(body))
	if _, err := io.WriteString(c.c, pkt); err != nil {
		return fmt.Errorf("gdbstub: send %q: %w", short(payload), err)
	}
	if !c.ack {
		return nil
	}
	for {
		b, err := c.r.ReadByte()
		if err != nil {
			return fmt.Errorf("gdbstub: ack for %q: %w", short(payload), err)
		}
		switch b {
		case '+':
			return nil
		case '-':
			if _, err := io.WriteString(c.c, pkt); err != nil {
				return fmt.Errorf("gdbstub: resend %q: %w", short(payload), err)
			}
		}
	}
}

// packetGrace bounds the reading of a packet once its '$' came.
const packetGrace = 5 * time.Second

// recv reads one packet, skipping acknowledgements and noise between
// packets.
func (c *Conn) recv(ctx context.Context) (string, error) {
	c.deadline(ctx)
	for {
		b, err := c.r.ReadByte()
		if err != nil {
			return "", fmt.Errorf("gdbstub: read: %w", err)
		}
		if b == '$' {
			break
		}
	}
	// ctx bounds the wait for a packet, not the packet: one cut in the
	// middle would be lost, and with it a stop reply (the VM stopped,
	// and nothing would ever say so again).
	_ = c.c.SetDeadline(time.Now().Add(packetGrace))
	var body []byte
	for {
		b, err := c.r.ReadByte()
		if err != nil {
			return "", fmt.Errorf("gdbstub: read: %w", err)
		}
		if b == '#' {
			break
		}
		body = append(body, b)
	}
	var sum [2]byte
	if _, err := io.ReadFull(c.r, sum[:]); err != nil {
		return "", fmt.Errorf("gdbstub: read checksum: %w", err)
	}
	want, err := strconv.ParseUint(string(sum[:]), 16, 8)
	if err != nil || byte(want) != checksum(string(body)) {
		if c.ack {
			c.wmu.Lock()
			_, _ = io.WriteString(c.c, "-")
			c.wmu.Unlock()
			return c.recv(ctx)
		}
		return "", fmt.Errorf("%w: bad checksum on %q", ErrProtocol, short(string(body)))
	}
	if c.ack {
		c.wmu.Lock()
		_, err := io.WriteString(c.c, "+")
		c.wmu.Unlock()
		if err != nil {
			return "", fmt.Errorf("gdbstub: ack: %w", err)
		}
	}
	return unescape(body), nil
}

// unescape undoes the binary escape and run-length encoding.
func unescape(body []byte) string {
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		switch ch := body[i]; {
		case ch == '}' && i+1 < len(body):
			i++
			b.WriteByte(body[i] ^ 0x20)
		case ch == '*' && i+1 < len(body) && b.Len() > 0:
			i++
			s := b.String()
			last := s[len(s)-1]
			for n := int(body[i]) - 29; n > 0; n-- {
				b.WriteByte(last)
			}
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Request sends one packet and returns the stub's answer. An "Exx" answer
// is an error; the empty answer wraps ErrUnsupported.
func (c *Conn) Request(ctx context.Context, payload string) (string, error) {
	if c.running {
		return "", fmt.Errorf("%w: %q while the VM runs: Interrupt or Wait first", ErrProtocol, short(payload))
	}
	if err := c.send(ctx, payload); err != nil {
		return "", err
	}
	reply, err := c.recv(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case reply == "":
		return "", fmt.Errorf("%w: %q", ErrUnsupported, short(payload))
	case len(reply) == 3 && reply[0] == 'E':
		return "", fmt.Errorf("%w: %q answered %s", ErrProtocol, short(payload), reply)
	}
	return reply, nil
}

// ok sends a request whose only good answer is OK.
func (c *Conn) ok(ctx context.Context, payload string) error {
	reply, err := c.Request(ctx, payload)
	if err != nil {
		return err
	}
	if reply != "OK" {
		return fmt.Errorf("%w: %q answered %q", ErrProtocol, short(payload), short(reply))
	}
	return nil
}

// Threads lists the vCPUs' thread ids.
func (c *Conn) Threads(ctx context.Context) ([]int, error) {
	var ids []int
	q := "qfThreadInfo"
	for {
		reply, err := c.Request(ctx, q)
		if err != nil {
			return nil, err
		}
		if reply == "l" {
			return ids, nil
		}
		if reply[0] != 'm' {
			return nil, fmt.Errorf("%w: %s answered %q", ErrProtocol, q, reply)
		}
		for _, f := range strings.Split(reply[1:], ",") {
			id, err := strconv.ParseInt(f, 16, 32)
			if err != nil {
				return nil, fmt.Errorf("%w: thread id %q: %v", ErrProtocol, f, err)
			}
			ids = append(ids, int(id))
		}
		q = "qsThreadInfo"
	}
}

// SetBreakpoint inserts a breakpoint at the guest virtual address addr.
// size is the Z packet's kind: the instruction length on x86 (1 does), 4
// on arm64 and riscv64 (2 for a compressed riscv instruction).
func (c *Conn) SetBreakpoint(ctx context.Context, kind BreakKind, addr uint64, size int) error {
	return c.ok(ctx, fmt.Sprintf("Z%d,%x,%x", kind, addr, size))
}

// ClearBreakpoint removes what SetBreakpoint inserted.
func (c *Conn) ClearBreakpoint(ctx context.Context, kind BreakKind, addr uint64, size int) error {
	return c.ok(ctx, fmt.Sprintf("z%d,%x,%x", kind, addr, size))
}

// selectThread makes later register and memory requests apply to thread.
func (c *Conn) selectThread(ctx context.Context, thread int) error {
	return c.ok(ctx, fmt.Sprintf("Hg%x", thread))
}

// Register reads register number reg of thread (the target's GDB numbering:
// rip is 16 on x86_64, pc 32 on arm64 and riscv64) as a little-endian value
// of at most 8 bytes.
func (c *Conn) Register(ctx context.Context, thread, reg int) (uint64, error) {
	if err := c.selectThread(ctx, thread); err != nil {
		return 0, err
	}
	reply, err := c.Request(ctx, fmt.Sprintf("p%x", reg))
	if err != nil {
		return 0, err
	}
	raw, err := hex.DecodeString(reply)
	if err != nil || len(raw) == 0 {
		return 0, fmt.Errorf("%w: register %d of thread %d: %q", ErrProtocol, reg, thread, short(reply))
	}
	var v uint64
	for i := min(len(raw), 8) - 1; i >= 0; i-- {
		v = v<<8 | uint64(raw[i])
	}
	return v, nil
}

// ReadMemory reads n bytes at the guest virtual address addr, translated by
// thread's MMU.
func (c *Conn) ReadMemory(ctx context.Context, thread int, addr uint64, n int) ([]byte, error) {
	if err := c.selectThread(ctx, thread); err != nil {
		return nil, err
	}
	reply, err := c.Request(ctx, fmt.Sprintf("m%x,%x", addr, n))
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(reply)
	if err != nil {
		return nil, fmt.Errorf("%w: memory at %#x: %q", ErrProtocol, addr, short(reply))
	}
	return b, nil
}

// WriteMemory writes b at the guest virtual address addr through thread's
// MMU.
func (c *Conn) WriteMemory(ctx context.Context, thread int, addr uint64, b []byte) error {
	if err := c.selectThread(ctx, thread); err != nil {
		return err
	}
	return c.ok(ctx, fmt.Sprintf("M%x,%x:%s", addr, len(b), hex.EncodeToString(b)))
}

// Action is one vCont action.
type Action struct {
	// Step single-steps the thread instead of continuing it.
	Step bool
	// Thread is the thread id; 0 applies the action to every thread no
	// other action names.
	Thread int
}

// Resume lets the named threads run (vCont) and returns at once; threads
// no action names stay stopped. Wait then reads the stop reply that ends
// the run.
func (c *Conn) Resume(ctx context.Context, actions ...Action) error {
	if c.running {
		return fmt.Errorf("%w: resume while running", ErrProtocol)
	}
	if len(actions) == 0 {
		actions = []Action{{}}
	}
	var b strings.Builder
	b.WriteString("vCont")
	for _, a := range actions {
		if a.Step {
			b.WriteString(";s")
		} else {
			b.WriteString(";c")
		}
		if a.Thread != 0 {
			fmt.Fprintf(&b, ":%x", a.Thread)
		}
	}
	if err := c.send(ctx, b.String()); err != nil {
		return err
	}
	c.running = true
	return nil
}

// ResumeExcept resumes every thread of threads but the stopped ones, which
// stay where they are.
func (c *Conn) ResumeExcept(ctx context.Context, threads []int, stopped ...int) error {
	var acts []Action
	for _, t := range threads {
		if !slices.Contains(stopped, t) {
			acts = append(acts, Action{Thread: t})
		}
	}
	if len(acts) == 0 {
		return fmt.Errorf("gdbstub: no thread but %v to resume", stopped)
	}
	return c.Resume(ctx, acts...)
}

// Wait reads the stop reply of the current run. If ctx ends first, the VM
// is still running (call Interrupt).
func (c *Conn) Wait(ctx context.Context) (Stop, error) {
	if !c.running {
		return Stop{}, fmt.Errorf("%w: wait while stopped", ErrProtocol)
	}
	for {
		reply, err := c.recv(ctx)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// The socket's deadline is ctx's: it may fire a moment
				// before ctx says so.
				_ = c.c.SetDeadline(time.Time{})
				if ctx.Err() != nil {
					return Stop{}, ctx.Err()
				}
				return Stop{}, context.DeadlineExceeded
			}
			return Stop{}, err
		}
		if strings.HasPrefix(reply, "O") && reply != "OK" {
			continue // console output packet
		}
		s, err := ParseStop(reply)
		if err != nil {
			return Stop{}, err
		}
		c.running = false
		return s, nil
	}
}

// Interrupt stops a running VM and returns the stop reply; on a stopped VM
// it does nothing.
func (c *Conn) Interrupt(ctx context.Context) (Stop, error) {
	if !c.running {
		return Stop{}, nil
	}
	c.wmu.Lock()
	c.deadline(ctx)
	_, err := c.c.Write([]byte{0x03})
	c.wmu.Unlock()
	if err != nil {
		return Stop{}, fmt.Errorf("gdbstub: interrupt: %w", err)
	}
	return c.Wait(ctx)
}

// Step single-steps thread alone, every other vCPU stopped, and returns
// its stop reply.
func (c *Conn) Step(ctx context.Context, thread int) (Stop, error) {
	if err := c.Resume(ctx, Action{Step: true, Thread: thread}); err != nil {
		return Stop{}, err
	}
	return c.Wait(ctx)
}

// ParseStop parses a stop reply packet (S, T, W or X).
func ParseStop(reply string) (Stop, error) {
	s := Stop{Raw: reply}
	if reply == "" {
		return s, fmt.Errorf("%w: empty stop reply", ErrProtocol)
	}
	switch reply[0] {
	case 'W', 'X':
		s.Exited = true
		return s, nil
	case 'S', 'T':
	default:
		return s, fmt.Errorf("%w: not a stop reply: %q", ErrProtocol, short(reply))
	}
	if len(reply) < 3 {
		return s, fmt.Errorf("%w: short stop reply %q", ErrProtocol, reply)
	}
	sig, err := strconv.ParseUint(reply[1:3], 16, 8)
	if err != nil {
		return s, fmt.Errorf("%w: stop signal in %q", ErrProtocol, reply)
	}
	s.Signal = int(sig)
	for _, f := range strings.Split(reply[3:], ";") {
		k, v, ok := strings.Cut(f, ":")
		if !ok || k != "thread" {
			continue
		}
		if _, tid, multi := strings.Cut(v, "."); multi {
			v = tid
		}
		id, err := strconv.ParseInt(strings.TrimPrefix(v, "p"), 16, 32)
		if err != nil {
			return s, fmt.Errorf("%w: thread in %q", ErrProtocol, reply)
		}
		s.Thread = int(id)
	}
	return s, nil
}
