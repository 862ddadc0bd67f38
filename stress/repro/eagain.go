package repro

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/inject"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/wire/event"
)

// The kernel's names the eagain sequences hold vCPUs in.
const (
	// eagainAsk is BPF's answer to ftrace's IPMODIFY handshake: asked
	// to share (SELF) during a trampoline's registration it answers
	// -EAGAIN; asked by a registering IPMODIFY ops (PEER) it builds the
	// trampoline again.
	eagainAsk = "bpf_tramp_ftrace_ops_func"
	// eagainBuild writes a trampoline image: after the -EAGAIN, the
	// second build, with the first image already freed.
	eagainBuild = "arch_prepare_bpf_trampoline"
	// eagainCaller is where a callsite's ftrace_ops are called and the
	// direct call is taken (directJumps).
	eagainCaller = "ftrace_caller"
)

// directJumps are ftrace_caller's jump to a direct trampoline per arch,
// as its bytes: arm64's `br x17`, riscv64's `jr t1` (compressed, or not
// in a kernel built without the C extension).
var directJumps = map[string][]directJump{
	"arm64":   {{asm: "br x17", bytes: []byte{0x20, 0x02, 0x1f, 0xd6}}},
	"riscv64": {{asm: "c.jr t1", bytes: []byte{0x02, 0x83}}, {asm: "jr t1", bytes: []byte{0x67, 0x00, 0x03, 0x00}}},
}

// directJump is one encoding of ftrace_caller's direct jump, or, found,
// the place to hold the reader at and the breakpoint's size there.
type directJump struct {
	asm   string
	bytes []byte
	size  int
}

// x86's ftrace_regs_caller tests ORIG_RAX (the direct trampoline
// arch_ftrace_set_direct_caller left) at this label, a jnz to the code
// that returns into it: the jnz's target is reached with a direct call
// only.
const x86DirectTest = "ftrace_regs_caller_jmp"

// eagainWriter is how long the reader stays held after the writer is let
// go from the handshake: time for the writer to take its ops off the list
// and free the image, as far as it goes before it waits for the reader's
// CPU (an IPI: every arch's text writes end in one), which the hold keeps
// from answering.
const eagainWriter = time.Second

// eagainHold is how long the writer stays at its next build once the
// reader is let go: the reader needs a few instructions.
const eagainHold = 2 * time.Second

// eagain (eagain-free): a BPF trampoline registers its ftrace_ops
// with register_ftrace_direct() (x86_64: the one direct ops all share,
// registered with the first trampoline), whose ftrace_startup() puts the
// ops on ftrace_ops_list (update_ftrace_function) before it asks the
// IPMODIFY handshake. On a function that already has an IPMODIFY ops, a
// trampoline that calls the original without ORIG_STACK answers -EAGAIN;
// ftrace takes the ops off the list again, and BPF frees the image at
// once (bpf_tramp_image_free, no grace period) and builds another.
// Meanwhile any CPU whose call to the function went through
// ftrace_ops_list_func (two ops on its callsite) called the ops, read the
// image's address and jumps there once the list function returns. The
// sequence holds the three moments: the writer (the fexit's attach, on
// CPU 0) at the handshake, with the ops on the list; the reader
// (fth_deliver's caller kthread on CPU 1) where the list function's caller
// jumps to a direct trampoline (arm64's `br x17`, riscv64's `jr t1`,
// x86_64's code after ftrace_regs_caller's ORIG_RAX test) with the image's
// address in hand; the writer let go to free the image, then stopped at
// its next build while the reader is let go into it. Freed BPF text is
// refilled with traps (x86_64 int3, arm64 BRK, riscv64 zeros): the reader
// dies on `Oops: int3`, `Oops - BRK` or `Oops - illegal instruction` in
// the freed trampoline.
//
// With free false (eagain-peer, the control) the fexit is attached first
// and the IPMODIFY ops registered after: BPF is asked as a peer, builds
// the trampoline again and puts the old image after an RCU-tasks grace
// period, which the held reader holds up. The same three holds, and
// nothing should fault.
func (sq *sequence) eagain(ctx context.Context, free bool) error {
	logf := sq.logf
	if runtime.GOARCH != "amd64" && directJumps[runtime.GOARCH] == nil {
		return fmt.Errorf("repro %s: x86_64, arm64 and riscv64 only: the reader's hold is where the list function's caller jumps to a direct trampoline, known for those; ppc64le's BPF JIT ignores ORIG_STACK (docs/findings.md 11), so no -EAGAIN there", sq.Opts.Repro)
	}
	h, closePort, err := sq.openListCallHold(eagainAsk, eagainBuild)
	if err != nil {
		return err
	}
	defer closePort()
	r, addr, jump, how, insnSize := h.r, h.addr, h.jump, h.how, h.insnSize
	// The freed image has no symbol left: the host names the fault after
	// the image the kernel last registered there (with BPF JIT symbols
	// on, as the race scenario has them, or x86_64 registers none).
	inject.JITKallsymsOn(sq.W)
	defer sq.watchImages(ctx)()

	d, err := sq.loadDeliver(2)
	if err != nil {
		return err
	}
	defer d.close()
	mod := d.mod
	fexit := func() error { return d.link(deliver.FuncSeq, oracle.FExit, "fexit-seq") }
	ipmodify := func() error { return mod.Attach("ops-ipmodify") }
	steps := []step{
		{"attach fth_deliver.ko's counting ftrace_ops (ops) to " + deliver.FuncSeq + ": with a second ops there its callsite calls ftrace_ops_list_func",
			func() error { return mod.Attach("ops") }},
		{"register fth_deliver.ko's IPMODIFY ftrace_ops (ops-ipmodify) on " + deliver.FuncSeq, ipmodify},
	}
	write, writeWhat := fexit, "attach a BPF fexit to "+deliver.FuncSeq+" (its trampoline calls the original: the handshake answers -EAGAIN)"
	if !free {
		steps[1] = step{"attach a BPF fexit to " + deliver.FuncSeq, fexit}
		write, writeWhat = ipmodify, "register ops-ipmodify on "+deliver.FuncSeq+" (BPF is asked as a peer and builds the trampoline again)"
	}
	total := len(steps) + 2
	if err := sq.doSteps(steps, total); err != nil {
		return err
	}
	// The callers run throughout: the one on CPU 1 is the reader.
	if err := mod.Run(true); err != nil {
		return fmt.Errorf("repro: start the callers: %w", err)
	}
	defer func() {
		if err := mod.Run(false); err != nil {
			logf("stop the callers: %v", err)
		}
	}()
	arm := event.RaceMsg{Op: event.RaceArm, Addr: addr[eagainAsk], Size: insnSize, CPU: 0, TimeoutMS: 10000,
		Then: &event.RaceMsg{Op: event.RaceArm, Addr: jump, Size: how.size, CPU: 1, TimeoutMS: 5000, HoldMS: int(eagainWriter / time.Millisecond),
			Then: &event.RaceMsg{Op: event.RaceArm, Addr: addr[eagainBuild], Size: insnSize, CPU: 0, TimeoutMS: 3000, HoldMS: int(eagainHold / time.Millisecond)}}}
	if err := r.Arm(arm); err != nil {
		return fmt.Errorf("repro: arm at %s: %w", eagainAsk, err)
	}
	logf("%d/%d %s from CPU 0, the host holding it at %s, the reader (CPU 1's caller) at %s, then the writer at its next %s", total-1, total, writeWhat, eagainAsk, how.asm, eagainBuild)
	written := onCPU0(write)
	held, err := eagainHolds(r)
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	logf("%d/%d %s", total, total, held)
	sq.awaitWrite(written, writeWhat)
	sq.Sleep(callsAfter)
	return nil
}

// listCallHold is what a sequence needs to hold a writer, and a reader on
// its way from a list function to a direct trampoline: the race port, the
// writers' addresses, the reader's hold, and the size of a breakpoint at a
// function's entry.
type listCallHold struct {
	r        *raceHolds
	addr     ksyms.Table
	jump     uint64
	how      directJump
	insnSize int
}

// openListCallHold opens the race port, reads the addresses of writers
// (functions a writer is held at) and finds the reader's hold; close
// closes the port.
func (sq *sequence) openListCallHold(writers ...string) (listCallHold, func(), error) {
	r, closePort, err := sq.openRacePort()
	if err != nil {
		return listCallHold{}, nil, err
	}
	h := listCallHold{r: r, insnSize: 4}
	if runtime.GOARCH == "amd64" {
		h.insnSize = 1
	}
	fail := func(err error) (listCallHold, func(), error) {
		closePort()
		return listCallHold{}, nil, err
	}
	h.addr, err = ksyms.Read(ksyms.DefaultPath, append([]string{eagainCaller, x86DirectTest}, writers...))
	if err != nil {
		return fail(fmt.Errorf("repro: %w", err))
	}
	for _, name := range writers {
		if _, ok := h.addr.Addr(name); !ok {
			return fail(fmt.Errorf("repro: no kallsyms address for %s", name))
		}
	}
	h.jump, h.how, err = r.directJumpOf(h.addr)
	if err != nil {
		return fail(fmt.Errorf("repro: where a list function's caller jumps to a direct trampoline: %w", err))
	}
	sq.logf("the direct call is taken at %s", h.how.asm)
	return h, closePort, nil
}

// eagainHolds reads the host's answers to the eagain sequences' chain of
// three arms and says what was held, or why the sequence did not run.
func eagainHolds(r *raceHolds) (string, error) {
	next := r.Expect
	// The longest of the chain's stops (10 s) and the host's answer.
	const wait = raceport.Reply + raceport.Slack
	if m, err := next(wait, event.RaceStopped, event.RaceTimeout, event.RaceMissed); err != nil || m.Op != event.RaceStopped {
		return "", fmt.Errorf("the writer did not stop at %s: %+v %v", eagainAsk, m, err)
	}
	if _, err := next(wait, event.RaceArmed); err != nil {
		return "", err
	}
	m, err := next(wait, event.RaceStopped, event.RaceTimeout, event.RaceMissed)
	if err != nil {
		return "", err
	}
	// The writer is let go; its next build is armed later.
	if _, err := next(wait, event.RaceReleased); err != nil {
		return "", err
	}
	if m.Op != event.RaceStopped {
		return "", fmt.Errorf("the reader never reached %s's jump to the direct trampoline while the writer was held at %s (%s): the sequence did not run", eagainCaller, eagainAsk, m.Msg)
	}
	// The reader is let go as the writer's next build is armed.
	if _, err := next(wait, event.RaceReleased); err != nil {
		return "", err
	}
	if _, err := next(wait, event.RaceArmed); err != nil {
		return "", err
	}
	third, err := next(wait, event.RaceStopped, event.RaceTimeout, event.RaceMissed)
	if err != nil {
		return "", err
	}
	if third.Op != event.RaceStopped {
		return fmt.Sprintf("the reader held at the direct call while the writer went on from %s, then let go; the writer did not build again (%s)", eagainAsk, third.Msg), nil
	}
	if _, err := next(wait, event.RaceReleased); err != nil {
		return "", err
	}
	return fmt.Sprintf("the reader held at the direct call while the writer went on from %s, then let go into the image it had read, the writer held at its next %s", eagainAsk, eagainBuild), nil
}

// directJumpOf finds where this arch's list-function caller jumps to a
// direct trampoline: in ftrace_caller on arm64 and riscv64, at the
// target of ftrace_regs_caller's jnz on x86_64 (what it jumps to is
// decoded from the jnz's bytes).
func (r *raceHolds) directJumpOf(addr ksyms.Table) (uint64, directJump, error) {
	if runtime.GOARCH != "amd64" {
		at, j, err := findJump(r, addr[eagainCaller], 512, directJumps[runtime.GOARCH])
		j.asm = fmt.Sprintf("%s+%#x (%s)", eagainCaller, at-addr[eagainCaller], j.asm)
		return at, j, err
	}
	at := addr[x86DirectTest]
	if at == 0 {
		return 0, directJump{}, fmt.Errorf("no kallsyms address for %s", x86DirectTest)
	}
	b, err := r.Port.ReadText(at, 8)
	if err != nil {
		return 0, directJump{}, err
	}
	var target uint64
	switch {
	case b[0] == 0x75: // jnz rel8
		target = at + 2 + uint64(int64(int8(b[1])))
	case b[0] == 0x0f && b[1] == 0x85: // jnz rel32
		target = at + 6 + uint64(int64(int32(binary.LittleEndian.Uint32(b[2:6]))))
	default:
		return 0, directJump{}, fmt.Errorf("%s is % x, not a jnz", x86DirectTest, b)
	}
	return target, directJump{asm: fmt.Sprintf("the target of %s's jnz (%s+%#x)", x86DirectTest, x86DirectTest, target-at), size: 1}, nil
}

// findJump has the host read n bytes at addr and returns the address of
// the first instruction there that is one of jumps.
func findJump(r *raceHolds, addr uint64, n int, jumps []directJump) (uint64, directJump, error) {
	b, err := r.Port.ReadText(addr, n)
	if err != nil {
		return 0, directJump{}, err
	}
	for off := 0; off < len(b); {
		for _, j := range jumps {
			if bytes.HasPrefix(b[off:], j.bytes) {
				j.size = len(j.bytes)
				return addr + uint64(off), j, nil
			}
		}
		// riscv64's lengths are in the first two bits (11: four bytes,
		// else a compressed two); arm64's are all four.
		if runtime.GOARCH == "riscv64" && b[off]&3 != 3 {
			off += 2
		} else {
			off += 4
		}
	}
	return 0, directJump{}, fmt.Errorf("none of %d encodings in the first %d bytes", len(jumps), n)
}
