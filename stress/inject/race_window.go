package inject

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"

	"github.com/ftrace-harness/fth/stress/disasm"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// windowRead is how many bytes of a new image the host reads to decode
// its window: an x86_64 fentry trampoline of one program is about 200
// bytes, an ftrace_ops trampoline about 160.
const windowRead = 1024

// insnWindow is one target's decoded window: the instructions a task passes
// through from the image's entry to its return. Every image of a target
// has the same layout (the same program on the same function, or the same
// copy of ftrace_caller), so the first is decoded and the injections walk
// it, one instruction each.
type insnWindow struct {
	insns []disasm.Insn
	// addr and code are the decoded image's address and bytes.
	addr uint64
	code []byte
	// actions race each instruction in turn: a point is an instruction
	// and an action.
	actions []string
	// err is why the window could not be decoded: the injections then
	// all go to the image's first instruction, as before windows.
	err error
	// pos is the walk's current point, tries the injections made there.
	pos, tries int
	// start is the instruction the walk starts at (injectfrom=random),
	// counted in the walk's direction.
	start int
	// backwards walks the instructions from the last: the INT3 window's
	// patcher steps, whose last ones (the final sync, the references
	// dropped, the batch emptied) are where a handler and the end of a
	// batch meet, which a campaign's short share must reach first.
	backwards bool
}

// decodeWindow decodes, once per target, the window of the image at addr, and
// reports it (KindRaceWindow).
func (r *Injector) decodeWindow(target, sym string, addr uint64, length int, actions []string) *insnWindow {
	return r.decodeWith(target, sym, addr, length, actions, disasm.Window)
}

// decodeWith is decodeWindow with the decoder of a window other than an
// image's straight path (the INT3 window's patcher steps).
// streamInjectFrom is the seed stream of injectfrom=random's start.
const streamInjectFrom = 0x667468696e6a6672

func (r *Injector) decodeWith(target, sym string, addr uint64, length int, actions []string, decode func(goarch string, addr uint64, code []byte) ([]disasm.Insn, error)) *insnWindow {
	if w, ok := r.windows[target]; ok {
		return w
	}
	w := &insnWindow{actions: actions, addr: addr}
	r.windows[target] = w
	code, err := r.readImage(addr, length)
	if err == nil {
		w.code = code
		w.insns, err = decode(runtime.GOARCH, addr, code)
	}
	ev := event.RaceWindow{Target: target, Symbol: sym, Addr: fmt.Sprintf("%#x", addr), Arch: runtime.GOARCH, Actions: actions}
	if err != nil {
		// A partly decoded window is no window: every injection goes
		// to +0x0, once.
		w.err, w.insns = err, nil
		ev.Unreachable = fmt.Sprintf("not decoded, every injection at +0x0: %v", err)
		emit.Logf(r.env.W, "race: %s window: %v", target, ev.Unreachable)
	} else {
		if r.env.Opts.InjectFrom == options.InjectRandom {
			w.start = rand.New(rand.NewPCG(uint64(r.env.Opts.Seed), streamInjectFrom^uint64(len(r.windows)))).IntN(len(w.insns))
			emit.Logf(r.env.W, "race: %s walk starts at instruction %d of %d (injectfrom=random)", target, w.start, len(w.insns))
		}
		ev.Code = hex.EncodeToString(code[:w.insns[len(w.insns)-1].Off+w.insns[len(w.insns)-1].Len])
		for _, in := range w.insns {
			ev.Insns = append(ev.Insns, event.WindowInsn{Off: in.Off, Len: in.Len, Asm: in.Text})
		}
		emit.Logf(r.env.W, "race: %s window at %s: %d instructions, %d bytes", target, sym, len(w.insns), len(ev.Code)/2)
	}
	_ = r.env.W.Emit(event.Event{Kind: event.KindRaceWindow, RaceWindow: &ev})
	return w
}

// oneInsnWindow reports the window of a target that is one place (a
// callsite's second instruction): the instruction at addr, decoded.
func (r *Injector) oneInsnWindow(target, sym string, addr uint64, off int, actions []string) *insnWindow {
	if w, ok := r.windows[target]; ok {
		return w
	}
	ev := event.RaceWindow{Target: target, Symbol: sym, Addr: fmt.Sprintf("%#x", addr), Arch: runtime.GOARCH, Actions: actions}
	in := disasm.Insn{Off: off, Len: insnSize()}
	code, err := r.Port.ReadText(addr+uint64(off), 4)
	if err == nil {
		var d disasm.Insn
		if d, err = disasm.One(runtime.GOARCH, addr+uint64(off), code); err == nil {
			in.Len, in.Text = d.Len, d.Text
			ev.Code = hex.EncodeToString(code[:d.Len])
		}
	}
	if err != nil {
		emit.Logf(r.env.W, "race: %s at %s+%#x not decoded: %v", target, sym, off, err)
	}
	ev.Insns = []event.WindowInsn{{Off: off, Len: in.Len, Asm: in.Text}}
	_ = r.env.W.Emit(event.Event{Kind: event.KindRaceWindow, RaceWindow: &ev})
	w := &insnWindow{insns: []disasm.Insn{in}, actions: actions}
	r.windows[target] = w
	return w
}

// readImage reads the start of an image through the host: its length
// when the kernel gave it (a BPF image's is a page), at most windowRead
// bytes, or up to the end of its page when the next one is unmapped.
func (r *Injector) readImage(addr uint64, length int) ([]byte, error) {
	first := windowRead
	if length > 0 {
		first = min(length, windowRead)
	}
	for _, n := range []int{first, min(first, int(4096-addr%4096))} {
		h, err := r.Port.Peek(addr, n)
		if errors.Is(err, raceport.ErrUnreadable) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return hex.DecodeString(h)
	}
	return nil, fmt.Errorf("the image at %#x is unreadable through the gdbstub", addr)
}

// pointTries is how many injections a point gets before the walk moves
// on without having explored it: one that missed or whose task was not
// held in the target explored nothing (a loaded machine's preemptor can
// give up at its bound), so the point is tried again.
const pointTries = 3

// place is where the current target's next injection goes, and what
// races it there: the window's points in order, an instruction with each
// action in turn, wrapping round once every point was injected at.
func (w *insnWindow) place() (disasm.Insn, string) {
	action := w.actions[w.pos%len(w.actions)]
	if w.err != nil || len(w.insns) == 0 {
		return disasm.Insn{}, action
	}
	i := (w.pos/len(w.actions) + w.start) % len(w.insns)
	if w.backwards {
		i = len(w.insns) - 1 - i
	}
	return w.insns[i], action
}

// done records the outcome of the injection at the current point: the
// walk stays there while the point is unexplored and has tries left.
func (w *insnWindow) done(outcome string) {
	w.tries++
	if explored(outcome) || w.tries >= pointTries {
		w.pos++
		w.tries = 0
	}
}

// explored reports whether an injection's outcome says anything about
// its point: missed and not-preempted ones held no task in the target.
func explored(outcome string) bool {
	return outcome != event.InjMissed && outcome != event.InjNotPreempted
}

// wants reports whether a target with n injections (options.All: every
// point of its window explored or tried pointTries times) makes its
// injection i.
func (w *insnWindow) wants(i, n int) bool {
	if n != options.All {
		return i < n
	}
	if w == nil {
		return i == 0
	}
	return w.pos < max(len(w.insns), 1)*len(w.actions)
}
