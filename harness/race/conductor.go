// Package race is the host's half of the race scenario's preemption
// injection. The agent picks a place (a BPF trampoline's first
// instruction, a callsite's second) and asks, on the race port, for a vCPU
// to be stopped there; the conductor sets a breakpoint through QEMU's
// gdbstub, and when the chosen vCPU stops exactly there it lets every
// other vCPU run while that one stays held. The agent then makes a
// reschedule pending for the held CPU (it wakes a higher-priority task
// pinned there) and asks for the release: the held vCPU resumes, takes
// the interrupt before the instruction, and the task is preempted at that
// exact instruction while the agent races it from another CPU.
package race

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ftrace-harness/fth/harness/gdbstub"
	"github.com/ftrace-harness/fth/harness/machine"
	"github.com/ftrace-harness/fth/wire/event"
)

// Conductor serves one VM's race port.
type Conductor struct {
	Log *slog.Logger
	// Target is the VM itself (harness/cell passes the qemu.VM), not the
	// machine.Instance the monitor reads.
	Target machine.Injector
	// PCRegister is the arch's GDB register number of the program counter.
	PCRegister int
	// HoldLimit bounds how long a vCPU stays held waiting for the agent's
	// release: other CPUs may be waiting on it (an IPI, a stop_machine),
	// and a held vCPU must never become the hang the cell reports.
	HoldLimit time.Duration
	// Stats counts what happened, for the cell's log.
	Stats Stats

	gdb     *gdbstub.Conn
	threads []int
	// held are the vCPUs held at a breakpoint, in the order they stopped.
	held []hold
	// letGo are the vCPUs let go at their arm's bound whose agent has
	// not sent its release yet, each with where the other vCPUs were
	// then (othersAt).
	letGo  map[int]map[int]uint64
	bpAddr uint64
	bpSize int
	// lines are the agent's messages, which a trace reads while it runs
	// for the untrace that ends it.
	lines <-chan []byte
}

// hold is one held vCPU: its number and its gdbstub thread, and when
// the host lets it go itself if the agent has not (zero: HoldLimit).
type hold struct {
	cpu, thread int
	bound       time.Time
}

// nextBound is the earliest bound of a held vCPU, and whether there is one.
func (c *Conductor) nextBound() (time.Time, bool) {
	var t time.Time
	for _, h := range c.held {
		if !h.bound.IsZero() && (t.IsZero() || h.bound.Before(t)) {
			t = h.bound
		}
	}
	return t, !t.IsZero()
}

// Stats counts the conductor's outcomes.
type Stats struct {
	Armed, Stopped, Missed, Timeouts, Released, ForcedReleases int
	// BoundReleases counts the vCPUs let go at their arm's BoundMS.
	BoundReleases int
	// CondRuns counts the stops at an armed place whose condition did
	// not hold: the vCPU ran on.
	CondRuns int
	// Passed counts the other vCPUs stepped past an arm's place
	// (PassOthers).
	Passed int
}

// heldIndex is vCPU cpu's place in held, -1 when it is not held.
func (c *Conductor) heldIndex(cpu int) int {
	return slices.IndexFunc(c.held, func(h hold) bool { return h.cpu == cpu })
}

// heldThreads are the threads of the held vCPUs.
func (c *Conductor) heldThreads() []int {
	var out []int
	for _, h := range c.held {
		out = append(out, h.thread)
	}
	return out
}

// resumeFree resumes every vCPU that is not held; with every one held the
// VM stays stopped.
func (c *Conductor) resumeFree(ctx context.Context) error {
	if len(c.held) == 0 {
		return c.gdb.Resume(ctx)
	}
	if len(c.held) == len(c.threads) {
		return nil
	}
	return c.gdb.ResumeExcept(ctx, c.threads, c.heldThreads()...)
}

// DefaultHoldLimit is HoldLimit's default.
const DefaultHoldLimit = 10 * time.Second

// requestTimeout bounds one gdbstub exchange.
const requestTimeout = 5 * time.Second

// Serve answers the agent until the port closes or ctx ends, then lets the
// VM run free of the stub.
func (c *Conductor) Serve(ctx context.Context) error {
	ch := c.Target.RaceChannel()
	if ch == nil {
		return errors.New("race: the target has no race port")
	}
	if c.HoldLimit == 0 {
		c.HoldLimit = DefaultHoldLimit
	}
	lines := make(chan []byte)
	c.lines = lines
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(ch)
		for sc.Scan() {
			select {
			case lines <- append([]byte(nil), sc.Bytes()...):
			case <-ctx.Done():
				return
			}
		}
	}()
	defer c.finish()
	enc := json.NewEncoder(ch)
	reply := func(m event.RaceMsg) {
		c.Log.Debug("race: to the agent", "op", m.Op, "cpu", m.CPU, "addr", fmt.Sprintf("%#x", m.Addr), "msg", m.Msg)
		if err := enc.Encode(m); err != nil {
			c.Log.Warn("race: reply to the agent", "op", m.Op, "err", err)
		}
	}
	for {
		var holdLimit, bound <-chan time.Time
		if len(c.held) != 0 {
			holdLimit = time.After(c.HoldLimit)
		}
		if t, ok := c.nextBound(); ok {
			bound = time.After(time.Until(t))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-bound:
			if err := c.releaseBound(ctx); err != nil {
				return err
			}
		case <-holdLimit:
			c.Stats.ForcedReleases++
			c.Log.Warn("race: the agent did not release the held vCPU in time; releasing it", "held", c.held, "limit", c.HoldLimit)
			if err := c.releaseAll(ctx); err != nil {
				return err
			}
			reply(event.RaceMsg{Op: event.RaceError, Msg: fmt.Sprintf("the host released the held vCPU after %v without a release", c.HoldLimit)})
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			var m event.RaceMsg
			if err := json.Unmarshal(line, &m); err != nil {
				reply(event.RaceMsg{Op: event.RaceError, Msg: fmt.Sprintf("not a race message: %q", line)})
				continue
			}
			if err := c.handle(ctx, m, reply); err != nil {
				reply(event.RaceMsg{Op: event.RaceError, Msg: err.Error()})
				// A stub that failed mid-exchange leaves the VM in an
				// unknown state: stop conducting, let it run.
				return err
			}
		}
	}
}

func (c *Conductor) handle(ctx context.Context, m event.RaceMsg, reply func(event.RaceMsg)) error {
	switch m.Op {
	case event.RaceArm:
		if c.heldIndex(m.CPU) >= 0 {
			reply(event.RaceMsg{Op: event.RaceError, Msg: fmt.Sprintf("arm for vCPU %d, which is held: release it first", m.CPU)})
			return nil
		}
		return c.armChain(ctx, m, reply)
	case event.RaceRelease:
		if at, ok := c.letGo[m.CPU]; ok {
			delete(c.letGo, m.CPU)
			reply(event.RaceMsg{Op: event.RaceReleased, CPU: m.CPU, Late: true, PCs: at, Msg: "the host had let the vCPU go at the arm's bound before this release"})
			return nil
		}
		if c.heldIndex(m.CPU) < 0 {
			reply(event.RaceMsg{Op: event.RaceError, Msg: fmt.Sprintf("release of vCPU %d, which is not held (held: %v)", m.CPU, c.held)})
			return nil
		}
		return c.releaseCPU(ctx, m.CPU, reply)
	case event.RacePeek:
		return c.peek(ctx, m, reply)
	case event.RaceTrace:
		return c.trace(ctx, m, reply)
	case event.RaceUntrace:
		// A trace that ended on its own time already answered.
		reply(event.RaceMsg{Op: event.RaceUntraced})
		return nil
	}
	reply(event.RaceMsg{Op: event.RaceError, Msg: fmt.Sprintf("unknown op %q", m.Op)})
	return nil
}

// peek reads guest memory for the agent: the VM stops for the read and
// runs on, every vCPU but a held one (a peek while a vCPU is held keeps
// it held).
func (c *Conductor) peek(ctx context.Context, m event.RaceMsg, reply func(event.RaceMsg)) error {
	rctx, cancel, err := c.stop(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	n := m.Size
	if n <= 0 {
		n = 8
	}
	// A vCPU translates through its current page tables: one in user mode
	// may have the kernel unmapped (arm64's KPTI), so every vCPU is tried.
	var b []byte
	var rerr error
	for _, thread := range c.threads {
		if b, rerr = c.gdb.ReadMemory(rctx, thread, m.Addr, n); rerr == nil {
			break
		}
	}
	if err := c.resumeFree(rctx); err != nil {
		return err
	}
	if rerr != nil {
		reply(event.RaceMsg{Op: event.RacePeeked, Addr: m.Addr, Msg: fmt.Sprintf("unreadable through every vCPU: %v", rerr)})
		return nil
	}
	reply(event.RaceMsg{Op: event.RacePeeked, Addr: m.Addr, Insn: hex.EncodeToString(b)})
	return nil
}

func (c *Conductor) connect(ctx context.Context) error {
	if c.gdb != nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	g, err := c.Target.DialGDB(rctx)
	if err != nil {
		return err
	}
	threads, err := g.Threads(rctx)
	if err != nil {
		g.Close()
		return err
	}
	c.gdb, c.threads = g, threads
	c.Log.Info("race: connected to the gdbstub", "vcpus", len(threads))
	return nil
}

// stop connects to the stub if need be and stops the VM for one request,
// whose time the returned context bounds.
func (c *Conductor) stop(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := c.connect(ctx); err != nil {
		return ctx, func() {}, err
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	_, err := c.gdb.Interrupt(rctx)
	return rctx, cancel, err
}

// armChain runs an arm and, once it holds its vCPU, the arm chained to it
// (Then) with no round trip to the agent, which may be on the held vCPU:
// when Then's vCPU stops, or never does, the first is let go, and Then's
// is held HoldMS more and let go too. An arm with HoldMS and no Then is
// let go by the host HoldMS after it held.
//
// A third arm (Then.Then) must be on the first's vCPU: the first is let
// go once the second holds, and HoldMS of the second's later the third's
// breakpoint is set and the second let go in one stop; the third is held
// its HoldMS. That is for a first (a writer) that frees what the second (a
// reader) holds and then waits for the reader's CPU (an IPI), with its
// next write still to come: the reader runs into the freed memory while
// the writer, let go by the reader's CPU, is stopped before that write.
func (c *Conductor) armChain(ctx context.Context, m event.RaceMsg, reply func(event.RaceMsg)) error {
	if m.Then != nil && m.Then.Then != nil && (m.Then.Then.CPU != m.CPU || m.Then.Then.Then != nil) {
		reply(event.RaceMsg{Op: event.RaceError, Msg: fmt.Sprintf("a third arm must be on the first's vCPU %d, and the last: got vCPU %d", m.CPU, m.Then.Then.CPU)})
		return nil
	}
	held, err := c.arm(ctx, m, -1, reply)
	if err != nil || !held || (m.Then == nil && m.HoldMS == 0) {
		return err
	}
	if m.Then == nil {
		return c.releaseAfter(ctx, m.HoldMS, m.CPU, reply)
	}
	next := *m.Then
	held, err = c.arm(ctx, next, -1, reply)
	if err != nil {
		return err
	}
	if err := c.releaseCPU(ctx, m.CPU, reply); err != nil || !held {
		return err
	}
	if next.Then == nil {
		return c.releaseAfter(ctx, next.HoldMS, next.CPU, reply)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Duration(next.HoldMS) * time.Millisecond):
	}
	last := *next.Then
	if held, err = c.arm(ctx, last, next.CPU, reply); err != nil || !held {
		return err
	}
	return c.releaseAfter(ctx, last.HoldMS, last.CPU, reply)
}

// releaseBound lets go every held vCPU whose bound has passed; the agent's
// release, when it comes, is answered then (Late), with where the other
// vCPUs were when the bound passed: what held the agent up.
func (c *Conductor) releaseBound(ctx context.Context) error {
	for {
		i := slices.IndexFunc(c.held, func(h hold) bool { return !h.bound.IsZero() && !time.Now().Before(h.bound) })
		if i < 0 {
			return nil
		}
		cpu := c.held[i].cpu
		var at map[int]uint64
		if err := c.release(ctx, i, func(ctx context.Context) { at = c.othersAt(ctx) }); err != nil {
			return err
		}
		if c.letGo == nil {
			c.letGo = map[int]map[int]uint64{}
		}
		c.letGo[cpu] = at
		c.Stats.BoundReleases++
		c.Log.Info("race: the agent did not release the held vCPU within its arm's bound; let go", "cpu", cpu, "others", at)
	}
}

// othersAt reads the program counter of each vCPU that is not held, the
// VM stopped; a vCPU whose register cannot be read is left out.
func (c *Conductor) othersAt(ctx context.Context) map[int]uint64 {
	at := map[int]uint64{}
	held := c.heldThreads()
	for _, thread := range c.threads {
		if slices.Contains(held, thread) {
			continue
		}
		pc, err := c.gdb.Register(ctx, thread, c.PCRegister)
		if err != nil {
			c.Log.Warn("race: read a vCPU's pc", "thread", thread, "err", err)
			continue
		}
		at[gdbstub.Stop{Thread: thread}.CPU()] = pc
	}
	return at
}

// releaseAfter lets vCPU cpu go ms milliseconds from now, unless ctx ends
// first.
func (c *Conductor) releaseAfter(ctx context.Context, ms, cpu int, reply func(event.RaceMsg)) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Duration(ms) * time.Millisecond):
	}
	return c.releaseCPU(ctx, cpu, reply)
}

// releaseCPU lets vCPU cpu go, if held, and says so.
func (c *Conductor) releaseCPU(ctx context.Context, cpu int, reply func(event.RaceMsg)) error {
	i := c.heldIndex(cpu)
	if i < 0 {
		return nil
	}
	if err := c.release(ctx, i, nil); err != nil {
		return err
	}
	c.Stats.Released++
	reply(event.RaceMsg{Op: event.RaceReleased, CPU: cpu})
	return nil
}

// arm sets the breakpoint, lets the VM run (every vCPU not held, and the
// held vCPU letGo when it is not -1), and waits for the stop; held says
// the vCPU asked for is held there.
func (c *Conductor) arm(ctx context.Context, m event.RaceMsg, letGo int, reply func(event.RaceMsg)) (held bool, err error) {
	// After a release the VM runs: stop it to set the breakpoint.
	rctx, cancel, err := c.stop(ctx)
	defer cancel()
	if err != nil {
		return false, err
	}
	size := m.Size
	if size == 0 {
		size = 1
	}
	if err := c.gdb.SetBreakpoint(rctx, gdbstub.Hardware, m.Addr, size); err != nil {
		return false, err
	}
	c.bpAddr, c.bpSize = m.Addr, size
	let := c.heldIndex(letGo)
	if let >= 0 {
		c.held = slices.Delete(c.held, let, let+1)
	}
	if err := c.resumeFree(rctx); err != nil {
		return false, err
	}
	if let >= 0 {
		c.Stats.Released++
		reply(event.RaceMsg{Op: event.RaceReleased, CPU: letGo})
	}
	c.Stats.Armed++
	reply(event.RaceMsg{Op: event.RaceArmed, Addr: m.Addr, CPU: m.CPU})

	wait := time.Duration(m.TimeoutMS) * time.Millisecond
	if wait <= 0 {
		wait = 10 * time.Second
	}
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	for {
		stop, err := c.gdb.Wait(wctx)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if err := c.disarm(ctx); err != nil {
				return false, err
			}
			c.Stats.Timeouts++
			reply(event.RaceMsg{Op: event.RaceTimeout, Addr: m.Addr, CPU: m.CPU, Msg: fmt.Sprintf("no vCPU reached %#x in %v", m.Addr, wait)})
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if stop.Exited {
			return false, fmt.Errorf("race: the VM exited while armed (%s)", stop.Raw)
		}
		rctx2, cancel2 := context.WithTimeout(ctx, requestTimeout)
		done, err := c.stopped(rctx2, m, stop, reply)
		cancel2()
		if done || err != nil {
			return done && err == nil && c.heldIndex(m.CPU) >= 0, err
		}
	}
}

// stopped handles a stop while armed: a hold, a miss, or (a condition
// that does not hold) the VM run on and done false.
func (c *Conductor) stopped(ctx context.Context, m event.RaceMsg, stop gdbstub.Stop, reply func(event.RaceMsg)) (bool, error) {
	pc, err := c.gdb.Register(ctx, stop.Thread, c.PCRegister)
	if err != nil {
		return true, err
	}
	if stop.CPU() != m.CPU && pc == m.Addr && m.PassOthers {
		// Another of the agent's tasks, passing through on purpose.
		c.Stats.Passed++
		return false, c.stepOver(ctx, stop.Thread, c.bpAddr, c.bpSize)
	}
	if stop.CPU() != m.CPU || pc != m.Addr {
		if err := c.disarm(ctx); err != nil {
			return true, err
		}
		c.Stats.Missed++
		reply(event.RaceMsg{Op: event.RaceMissed, Addr: pc, CPU: stop.CPU(),
			Msg: fmt.Sprintf("vCPU %d stopped at %#x (signal %d), not vCPU %d at %#x", stop.CPU(), pc, stop.Signal, m.CPU, m.Addr)})
		return true, nil
	}
	if m.CondWant != "" {
		addr := m.CondAddr
		if m.CondReg != nil {
			base, err := c.gdb.Register(ctx, stop.Thread, *m.CondReg)
			if err != nil {
				return true, err
			}
			addr += base
		}
		b, err := c.gdb.ReadMemory(ctx, stop.Thread, addr, len(m.CondWant)/2)
		if err != nil || hex.EncodeToString(b) != m.CondWant {
			// Not the moment asked for: run on, the breakpoint set.
			c.Stats.CondRuns++
			return false, c.stepOver(ctx, stop.Thread, c.bpAddr, c.bpSize)
		}
	}
	insn, err := c.gdb.ReadMemory(ctx, stop.Thread, m.Addr, 8)
	if err != nil {
		insn = nil // the record goes without the bytes
	}
	var seen []byte
	if m.LookAddr != 0 {
		seen, _ = c.gdb.ReadMemory(ctx, stop.Thread, m.LookAddr, max(m.LookLen, 1))
	}
	// The breakpoint goes before the others run, so that no other vCPU
	// stops there while this one is held.
	if err := c.gdb.ClearBreakpoint(ctx, gdbstub.Hardware, c.bpAddr, c.bpSize); err != nil {
		return true, err
	}
	c.bpAddr = 0
	h := hold{cpu: stop.CPU(), thread: stop.Thread}
	if m.BoundMS > 0 && m.Then == nil && m.HoldMS == 0 {
		h.bound = time.Now().Add(time.Duration(m.BoundMS) * time.Millisecond)
	}
	c.held = append(c.held, h)
	if err := c.resumeFree(ctx); err != nil {
		return true, err
	}
	c.Stats.Stopped++
	reply(event.RaceMsg{Op: event.RaceStopped, Addr: pc, CPU: stop.CPU(), Insn: hex.EncodeToString(insn), Seen: hex.EncodeToString(seen)})
	return true, nil
}

// stepOver lets a vCPU stopped at the armed breakpoint run on past it,
// the breakpoint staying armed: QEMU's TCG stops a vCPU resumed at a
// breakpoint's address again before it executes anything, so, as gdb
// does, the breakpoint goes for one step of that vCPU alone.
func (c *Conductor) stepOver(ctx context.Context, thread int, addr uint64, size int) error {
	if err := c.gdb.ClearBreakpoint(ctx, gdbstub.Hardware, addr, size); err != nil {
		return err
	}
	if _, err := c.gdb.Step(ctx, thread); err != nil {
		return err
	}
	if err := c.gdb.SetBreakpoint(ctx, gdbstub.Hardware, addr, size); err != nil {
		return err
	}
	return c.resumeFree(ctx)
}

// tracePoll is how long a trace waits for a stop before it looks for the
// agent's untrace.
const tracePoll = 100 * time.Millisecond

// defaultTraceLimit ends a trace the agent never ends.
const defaultTraceLimit = 30 * time.Second

// trace records, without holding anyone, every stop at m.Addrs whose
// register m.CondReg lies in [m.CondAddr, m.CondEnd), with the bytes at
// m.LookAddr as that vCPU found them, until the agent's untrace (or
// m.TimeoutMS); the answer to the untrace carries the stops. The vCPUs
// run free between stops, so the agent goes on with its action while
// the host watches each write it makes.
func (c *Conductor) trace(ctx context.Context, m event.RaceMsg, reply func(event.RaceMsg)) error {
	if m.CondReg == nil || len(m.Addrs) == 0 || m.CondEnd <= m.CondAddr {
		reply(event.RaceMsg{Op: event.RaceError, Msg: "trace needs addrs, cond_reg and cond_addr < cond_end"})
		return nil
	}
	size := max(m.Size, 1)
	rctx, cancel, err := c.stop(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	if err := c.breakpoints(rctx, m.Addrs, size, true); err != nil {
		return err
	}
	if err := c.resumeFree(rctx); err != nil {
		return err
	}
	c.Stats.Armed++
	reply(event.RaceMsg{Op: event.RaceArmed, Addrs: m.Addrs})
	limit := time.Duration(m.TimeoutMS) * time.Millisecond
	if limit <= 0 {
		limit = defaultTraceLimit
	}
	end := time.Now().Add(limit)
	out := event.RaceMsg{Op: event.RaceUntraced}
	for time.Now().Before(end) && !c.untraced(reply) {
		wctx, wcancel := context.WithTimeout(ctx, tracePoll)
		stop, err := c.gdb.Wait(wctx)
		wcancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return err
		}
		if stop.Exited {
			return fmt.Errorf("race: the VM exited while traced (%s)", stop.Raw)
		}
		sctx, scancel := context.WithTimeout(ctx, requestTimeout)
		err = c.traced(sctx, m, stop, size, &out)
		scancel()
		if err != nil {
			return err
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, requestTimeout)
	defer dcancel()
	if _, err := c.gdb.Interrupt(dctx); err != nil {
		return err
	}
	if err := c.breakpoints(dctx, m.Addrs, size, false); err != nil {
		return err
	}
	if err := c.resumeFree(dctx); err != nil {
		return err
	}
	reply(out)
	return nil
}

// untraced reports whether the agent has said untrace (or gone); any
// other message meanwhile is refused.
func (c *Conductor) untraced(reply func(event.RaceMsg)) bool {
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return true
			}
			var u event.RaceMsg
			if json.Unmarshal(line, &u) == nil && u.Op == event.RaceUntrace {
				return true
			}
			reply(event.RaceMsg{Op: event.RaceError, Msg: fmt.Sprintf("only untrace while a trace runs, not %q", line)})
		default:
			return false
		}
	}
}

// breakpoints sets (or clears) a hardware breakpoint at each of addrs.
func (c *Conductor) breakpoints(ctx context.Context, addrs []uint64, size int, set bool) error {
	for _, a := range addrs {
		op := c.gdb.ClearBreakpoint
		if set {
			op = c.gdb.SetBreakpoint
		}
		if err := op(ctx, gdbstub.Hardware, a, size); err != nil {
			return err
		}
	}
	return nil
}

// traced handles one stop of a trace: recorded in out when it is at a
// traced place with the register in range, and the vCPU stepped on.
func (c *Conductor) traced(ctx context.Context, m event.RaceMsg, stop gdbstub.Stop, size int, out *event.RaceMsg) error {
	pc, err := c.gdb.Register(ctx, stop.Thread, c.PCRegister)
	if err != nil {
		return err
	}
	if !slices.Contains(m.Addrs, pc) {
		// Not a trace stop (an interrupt the stub reported): run on.
		return c.resumeFree(ctx)
	}
	v, err := c.gdb.Register(ctx, stop.Thread, *m.CondReg)
	if err != nil {
		return err
	}
	if v >= m.CondAddr && v < m.CondEnd {
		var seen []byte
		if m.LookLen > 0 {
			seen, _ = c.gdb.ReadMemory(ctx, stop.Thread, m.LookAddr, m.LookLen)
		}
		if m.Look2Len > 0 && len(seen) == m.LookLen {
			second, _ := c.gdb.ReadMemory(ctx, stop.Thread, m.Look2Addr, m.Look2Len)
			seen = append(seen, second...)
		}
		out.Count++
		if len(out.Stops) < event.MaxTraceStops {
			out.Stops = append(out.Stops, event.TraceStop{Addr: pc, CPU: stop.CPU(), Reg: v, Seen: hex.EncodeToString(seen)})
		}
		c.Stats.Stopped++
	} else {
		c.Stats.CondRuns++
	}
	return c.stepOver(ctx, stop.Thread, pc, size)
}

// disarm stops the VM, removes the breakpoint, and resumes every vCPU
// that is not held.
func (c *Conductor) disarm(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := c.gdb.Interrupt(rctx); err != nil {
		return err
	}
	if c.bpAddr != 0 {
		if err := c.gdb.ClearBreakpoint(rctx, gdbstub.Hardware, c.bpAddr, c.bpSize); err != nil {
			return err
		}
		c.bpAddr = 0
	}
	return c.resumeFree(rctx)
}

// release lets the i-th held vCPU go; the others stay held. look, unless
// nil, runs first with the VM stopped.
func (c *Conductor) release(ctx context.Context, i int, look func(context.Context)) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := c.gdb.Interrupt(rctx); err != nil {
		return err
	}
	if look != nil {
		look(rctx)
	}
	c.held = slices.Delete(c.held, i, i+1)
	return c.resumeFree(rctx)
}

// releaseAll stops the VM, removes the breakpoint, and resumes every vCPU.
func (c *Conductor) releaseAll(ctx context.Context) error {
	c.held = nil
	return c.disarm(ctx)
}

// finish leaves the VM running with no client.
func (c *Conductor) finish() {
	if c.gdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if _, err := c.gdb.Interrupt(ctx); err == nil {
		if c.bpAddr != 0 {
			_ = c.gdb.ClearBreakpoint(ctx, gdbstub.Hardware, c.bpAddr, c.bpSize)
		}
		_ = c.gdb.Detach(ctx)
	}
	c.gdb.Close()
	c.Log.Info("race: conductor done", "armed", c.Stats.Armed, "stopped", c.Stats.Stopped, "missed", c.Stats.Missed,
		"timeouts", c.Stats.Timeouts, "released", c.Stats.Released, "forced_releases", c.Stats.ForcedReleases, "bound_releases", c.Stats.BoundReleases, "cond_runs", c.Stats.CondRuns, "passed", c.Stats.Passed)
}
