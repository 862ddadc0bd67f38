package inject

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/stress/disasm"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// The INT3 window (racetarget=int3, x86): x86 patches a live callsite in
// three steps, each followed by an IPI sync of every CPU: an INT3 over
// its first byte, the new tail, the new first byte. A CPU that runs the
// callsite meanwhile traps, and smp_text_poke_int3_handler() emulates the
// new instruction from the batch it finds, under a reference the batch's
// end waits for. Each injection holds the patcher, through the gdbstub,
// at one step of smp_text_poke_batch_finish() while it patches
// fth_target_counted's callsite (a conditional breakpoint: other batches
// run through); the racer calls the function back to back meanwhile. If
// it traps, the host holds it at the handler's entry, before it takes its
// reference, lets the patcher run on for the window, then lets the racer
// go: a batch that ends without waiting for it (no final sync) leaves it
// no batch to emulate from, and the kernel dies of a stray INT3.

// The patcher's and the handler's functions, and the batch they share.
const (
	int3Patcher = "smp_text_poke_batch_finish"
	int3Handler = "smp_text_poke_int3_handler"
	int3Batch   = "text_poke_array"
)

// Actions of the INT3 window: the function tracer instance filtered to
// fth_target_counted switched on (nop5 to call) or off (call to nop5), in
// one of two orders. Patcher first: a racer that traps is held at the
// handler's entry while the patcher runs on (the batch's end against a
// handler still to run). Handler first: the racer runs the handler while
// the patcher stays held at its step (the batch's state at that step, as
// a handler finds it).
const (
	raceEnable  = "enable"
	raceDisable = "disable"
	// The order suffixes.
	patcherFirst = "-patcher-first"
	handlerFirst = "-handler-first"
)

// int3Actions are the INT3 window's actions, each a point with every
// step.
var int3Actions = []string{raceEnable + patcherFirst, raceDisable + patcherFirst, raceEnable + handlerFirst, raceDisable + handlerFirst}

// int3Syms are the kernel addresses the INT3 window needs.
type int3Syms struct {
	patcher, patcherLen, handler, batch, stext uint64
}

// readInt3Syms reads them from kallsyms; the patcher's length runs to the
// next symbol.
func readInt3Syms() (int3Syms, error) {
	f, err := os.Open(ksyms.DefaultPath)
	if err != nil {
		return int3Syms{}, fmt.Errorf("race: %w", err)
	}
	defer f.Close()
	return parseInt3Syms(f)
}

// parseInt3Syms reads the INT3 window's symbols from a kallsyms listing.
func parseInt3Syms(r io.Reader) (int3Syms, error) {
	var s int3Syms
	next := ^uint64(0)
	var all []uint64
	err := ksyms.EachBeforeBPF(r, func(k ksyms.Sym) {
		if k.Module != "" {
			return
		}
		switch k.Name {
		case int3Patcher:
			s.patcher = k.Addr
		case int3Handler:
			s.handler = k.Addr
		case int3Batch:
			s.batch = k.Addr
		case "_stext":
			s.stext = k.Addr
		}
		all = append(all, k.Addr)
	})
	if err != nil {
		return s, fmt.Errorf("race: %s: %w", ksyms.DefaultPath, err)
	}
	if s.patcher == 0 || s.handler == 0 || s.batch == 0 || s.stext == 0 {
		return s, fmt.Errorf("race: %s lacks %s, %s, %s or _stext (CONFIG_KALLSYMS_ALL, and an x86 kernel that patches through INT3)", ksyms.DefaultPath, int3Patcher, int3Handler, int3Batch)
	}
	for _, a := range all {
		if a > s.patcher && a < next {
			next = a
		}
	}
	if next == ^uint64(0) {
		return s, fmt.Errorf("race: no symbol after %s to size it by", int3Patcher)
	}
	s.patcherLen = next - s.patcher
	return s, nil
}

// x86Callsite is the address of a function's patchable entry: the 5-byte
// nop or call at its start, after the IBT marker when it has one.
func (r *Injector) x86Callsite(fn uint64) (uint64, error) {
	b, err := r.Port.ReadText(fn, 9)
	if err != nil {
		return 0, err
	}
	h := hex.EncodeToString(b)
	off := 0
	if strings.HasPrefix(h, "f30f1efa") {
		off = 4
	}
	if len(b) < off+5 || (b[off] != 0xe8 && h[off*2:off*2+10] != nop5) {
		return 0, fmt.Errorf("race: %s starts % x: no 5-byte nop or call at its entry", fthtarget.Counted, b)
	}
	return fn + uint64(off), nil
}

// nop5 is x86's 5-byte nop, a disabled callsite.
const nop5 = "0f1f440000"

// int3Patches runs the INT3 window's injections: each step of the
// patcher, raced by switching tracing of fth_target_counted on and off.
func (r *Injector) int3Patches(ctx context.Context, n int) error {
	if err := options.CheckRaceTargets(options.RaceInt3, runtime.GOARCH); err != nil {
		return fmt.Errorf("race: %w", err)
	}
	syms, err := readInt3Syms()
	if err != nil {
		return err
	}
	fn, err := countedAddr()
	if err != nil {
		return err
	}
	inst, drop, err := targetInstance("fth_race_int3")
	if err != nil {
		return err
	}
	defer drop()
	if err := inst.SetTracer(tracefs.Nop); err != nil {
		return fmt.Errorf("race: tracer off: %w", err)
	}
	// The first function tracer on patches far more than the function
	// (measured: some 2,400 batches, none of them led by the callsite,
	// before the callsite's own); a second instance keeps one on, on a
	// function nobody calls, so that an enable patches the callsite alone.
	keep, dropKeep, err := tracefs.New(tracefs.DefaultRoot).FilteredInstance("fth_race_int3_keep", int3KeepFunc)
	if err != nil {
		return err
	}
	defer dropKeep()
	if err := keep.SetTracer(tracefs.Function); err != nil {
		return fmt.Errorf("race: function tracer on %s: %w", int3KeepFunc, err)
	}
	site, err := r.x86Callsite(fn)
	if err != nil {
		return err
	}
	emit.Logf(r.env.W, "race: int3: the patcher held at each step of %s patching %s's callsite at %#x", int3Patcher, fthtarget.Counted, site)
	w := r.decodeWith(options.RaceInt3, int3Patcher, syms.patcher, int(syms.patcherLen), int3Actions, disasm.Steps)
	w.backwards = true
	if r.env.Opts.RaceList {
		return nil
	}
	// The patcher stops only in the batch whose first entry is the
	// callsite: text_poke_array.vec[0].rel_addr, from _stext.
	rel := make([]byte, 4)
	binary.LittleEndian.PutUint32(rel, uint32(int32(site-syms.stext)))
	for i := 0; w.wants(i, n) && ctx.Err() == nil && r.more(); i++ {
		at, action := w.place()
		in := &event.Injection{Target: options.RaceInt3, Symbol: fmt.Sprintf("%s+%#x", int3Patcher, at.Off), Offset: at.Off, Asm: at.Text, Function: fthtarget.Counted, Action: action}
		arm := event.RaceMsg{Op: event.RaceArm, Addr: syms.patcher + uint64(at.Off), Size: 1, CPU: int3PatcherCPU,
			TimeoutMS: int(raceStopTimeout.Milliseconds()), CondAddr: syms.batch, CondWant: hex.EncodeToString(rel), LookAddr: site, LookLen: 5}
		if strings.HasSuffix(action, handlerFirst) {
			// The patcher alone is held, for the window, while the
			// racer runs the callsite (and the handler, on an INT3).
			arm.HoldMS = int(r.window.Milliseconds())
		} else {
			arm.Then = &event.RaceMsg{Op: event.RaceArm, Addr: syms.handler, Size: 1, CPU: r.cpu, TimeoutMS: int(int3TrapWait.Milliseconds()), HoldMS: int(r.window.Milliseconds())}
		}
		if err := r.injectInt3(in, arm, site, inst); err != nil {
			return err
		}
		w.done(in.Outcome)
	}
	return inst.SetTracer(tracefs.Nop)
}

// int3KeepFunc is the keeper instance's function: fth_target's, called
// only when a test asks for its bug.
const int3KeepFunc = "fth_bug_leak"

// int3PatcherCPU is where the action runs, and so the patcher: the
// controller's CPU (every CPU below the held one; the first).
const int3PatcherCPU = 0

// int3TrapWait bounds how long the host waits for the racer to trap once
// the patcher is held: the racer calls back to back, so a callsite that
// holds an INT3 traps it within a few calls.
const int3TrapWait = time.Second

// injectInt3 runs one injection of the INT3 window: the tracer state set
// before (off to enable, on to disable), the racer looping, the patcher
// armed at its step, the action, and the judgement from what the host
// held and what the callsite holds after.
func (r *Injector) injectInt3(in *event.Injection, arm event.RaceMsg, site uint64, inst tracefs.FS) error {
	r.seq++
	in.Seq, in.CPU, in.Addr = r.seq, r.cpu, fmt.Sprintf("%#x", arm.Addr)
	in.WindowMS = float64(r.window.Microseconds()) / 1000
	before, after, want := tracefs.Nop, tracefs.Function, "e8"
	if strings.HasPrefix(in.Action, raceDisable) {
		before, after, want = tracefs.Function, tracefs.Nop, nop5
	}
	if err := inst.SetTracer(before); err != nil {
		return fmt.Errorf("race: tracer %s before the injection: %w", before, err)
	}
	if err := r.racer.Poke(racer.Loop); err != nil {
		return err
	}
	// In flight from the arm on: the racer may trap and the kernel die
	// while the patcher, and this agent with it, is held.
	in.Outcome = event.InjReleased
	r.emit(*in)
	if err := r.Arm(arm); err != nil {
		return err
	}
	start := time.Now()
	// The patcher's CPU is the one the host was asked to stop.
	acted := racer.OnCPU(int3PatcherCPU, func(int) error { return inst.SetTracer(after) })
	trapped, err := r.int3Holds(in, arm)
	if err != nil {
		return err
	}
	var actErr error
	select {
	case actErr = <-acted:
		in.ActionDone = true
		in.ActionMS = float64(time.Since(start).Microseconds()) / 1000
	case <-time.After(raceReturnTimeout):
		return fmt.Errorf("race: tracer %s on %s did not end within %v", after, fthtarget.Counted, raceReturnTimeout)
	}
	if err := r.racer.Poke('s'); err != nil {
		return err
	}
	line, err := r.racer.Read(raceReturnTimeout)
	if err != nil || !strings.HasPrefix(line, "looped ") {
		return fmt.Errorf("race: the racer did not stop its calls: %q %v", line, err)
	}
	var calls, failed, errno int
	fmt.Sscanf(line, "looped %d %d %d", &calls, &failed, &errno)
	final, err := r.Port.Peek(site, 5)
	if err != nil {
		return err
	}
	in.InsnAfter = final
	judgeInt3(in, trapped, want, calls, failed, errno, actErr)
	r.emit(*in)
	return nil
}

// int3Holds reads the host's answers to a chained arm: the patcher held
// (or never there), then the racer trapped and held (or not), and the
// releases. It reports whether the racer trapped.
func (r *Injector) int3Holds(in *event.Injection, arm event.RaceMsg) (bool, error) {
	m, err := r.Recv(raceStopTimeout + raceport.Slack)
	if err != nil {
		return false, err
	}
	if m.Op != event.RaceStopped {
		in.Outcome, in.Msg = event.InjMissed, fmt.Sprintf("the patcher did not stop at %s in the batch that patches %s: %s", in.Symbol, fthtarget.Counted, m.Msg)
		return false, nil
	}
	// What the racer will run while the patcher is held.
	in.Insn = m.Seen
	in.Outcome = event.InjReleased
	r.emit(*in)
	if arm.Then == nil {
		// Handler first: the racer ran the callsite, trapping on an
		// INT3, while the host held the patcher.
		if _, err = r.Expect(time.Duration(arm.HoldMS)*time.Millisecond+raceport.Slack, event.RaceReleased); err != nil {
			return false, fmt.Errorf("race: the patcher's release: %w", err)
		}
		return strings.HasPrefix(in.Insn, "cc"), nil
	}
	trapped, err := r.ThenHolds(*arm.Then)
	if err != nil {
		return false, fmt.Errorf("race: the handler's arm: %w", err)
	}
	return trapped, nil
}

// ThenHolds reads the host's answers to a chained arm's Then, once the
// first arm held: armed, then stopped or timeout, then the first vCPU's
// release and, if Then held, its own after Then.HoldMS. It reports
// whether Then held.
func (h Holds) ThenHolds(then event.RaceMsg) (bool, error) {
	if _, err := h.Expect(raceport.Reply, event.RaceArmed); err != nil {
		return false, fmt.Errorf("armed: %w", err)
	}
	wait := time.Duration(then.TimeoutMS+then.HoldMS)*time.Millisecond + raceport.Slack
	m, err := h.Recv(wait)
	if err != nil {
		return false, err
	}
	held := m.Op == event.RaceStopped
	if !held && m.Op != event.RaceTimeout {
		return false, fmt.Errorf("%+v", m)
	}
	releases := 1
	if held {
		releases = 2
	}
	for range releases {
		if _, err = h.Expect(wait, event.RaceReleased); err != nil {
			return held, fmt.Errorf("release: %w", err)
		}
	}
	return held, nil
}

// judgeInt3 sets the outcome of an INT3 window injection that held the
// patcher: the racer's calls all returned, the action ended, and the
// callsite holds what the tracer state asks for (a call when on, the
// 5-byte nop when off). A kernel that died is marked by the host.
func judgeInt3(in *event.Injection, trapped bool, want string, calls, failed, errno int, actErr error) {
	if in.Outcome == event.InjMissed {
		return
	}
	how := fmt.Sprintf("the racer ran %s at the hold without trapping", in.Insn)
	switch {
	case trapped && strings.HasSuffix(in.Action, handlerFirst):
		how = fmt.Sprintf("the racer trapped on the INT3 (%s) and ran %s while the patcher was held", in.Insn, int3Handler)
	case trapped:
		how = fmt.Sprintf("the racer trapped on the INT3 (%s) and was held in %s while the patcher ran on", in.Insn, int3Handler)
	}
	switch {
	case !strings.HasPrefix(in.InsnAfter, want):
		in.Outcome = event.InjWrongState
		in.Msg = fmt.Sprintf("%s; the callsite ended as %s, not %s", how, in.InsnAfter, want)
	case failed > 0:
		in.Outcome = event.InjWrongState
		in.Msg = fmt.Sprintf("%s; %d of its %d calls failed (errno %d)", how, failed, calls, errno)
	default:
		in.Outcome = event.InjSurvived
		in.Msg = fmt.Sprintf("%s; %d calls, the callsite ended as %s", how, calls, in.InsnAfter)
	}
	if actErr != nil {
		in.Msg += "; action: " + actErr.Error()
	}
}
