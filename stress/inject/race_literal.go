package inject

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// The literal target (racetarget=literal, arm64 and riscv64). A CALL_OPS
// callsite is two things the kernel writes one at a time: the ops literal
// 8 bytes before the function, which ftrace_caller loads and calls
// op->func through, and the branch at the function's second instruction
// (arm64's BL, riscv64's JALR), a nop while nothing traces it. The kernel
// orders the two so that ftrace_caller always finds a real ops: the
// literal before the branch goes live (ftrace_make_call,
// ftrace_modify_call), the nop ops in the literal only on the callsite's
// way to a nop (ftrace_make_nop). Written the other way round, calls in
// between reach ftrace_caller with the nop ops, or with an ops the
// callsite no longer belongs to, and are silently not traced; when the
// stale literal is the nop ops, only the user being attached loses them,
// which no caller can tell from an attach that had not happened yet
// (docs/delivery.md), so no count sees it. The order itself can be seen:
// the host traces the kernel's text writers through the gdbstub, stops at
// each one whose address argument is this callsite, reads the callsite
// as that write finds it, and lets the vCPU on; nothing is held.
//
// The rule checked on the states a transition walks through (each write's
// view, then the callsite after the action): a state whose branch is live
// and whose literal names ftrace_nop_ops must be followed by the branch
// going to a nop. The transitions walk the callsite through every
// dispatch state a function tracer and a BPF fentry make: nop, one ops,
// the list ops, a direct call, a direct call beside an ops.

// literalArch is what the literal target needs of an arch: the kernel's
// text writers every callsite write goes through, with the address as
// their first argument, and that argument's GDB register.
type literalArch struct {
	writers []string
	addrReg int
	// nop is the branch slot's nop, little-endian as in memory.
	nop uint32
	// outOfLine: the literal and the bl are in the callsite's
	// out-of-line stub, the callsite a branch to it (ppc64le 7.3).
	outOfLine bool
}

// literalArches are the arches with a CALL_OPS literal. arm64 writes the
// literal with aarch64_insn_write_literal_u64() and the branch with
// aarch64_insn_patch_text_nosync(); riscv64 writes both through
// __patch_insn_write() (patch_text_nosync, patch_insn_write); ppc64le
// writes the literal with patch_ulong() and the branches with
// patch_instruction() (ftrace_replace_code).
var literalArches = map[string]literalArch{
	"arm64":   {writers: []string{"aarch64_insn_write_literal_u64", "aarch64_insn_patch_text_nosync"}, addrReg: 0, nop: 0xd503201f},
	"riscv64": {writers: []string{"__patch_insn_write"}, addrReg: 10, nop: 0x00000013},
	"ppc64le": {writers: []string{"patch_ulong", "patch_instruction"}, addrReg: 3, nop: 0x60000000, outOfLine: true},
}

// literalSite is where one callsite's literal and branch are, and how a
// look at it reads.
type literalSite struct {
	// ip is the callsite (rec->ip), lit its literal.
	ip, lit uint64
	// look bytes are read from lit; look2Len more from look2 after them.
	look     int
	look2    uint64
	look2Len int
	// condLo..condHi holds every address a write to this callsite
	// passes its writer.
	condLo, condHi uint64
	parse          func(h string) (literalState, error)
}

// inlineSite is arm64's and riscv64's callsite (ftrace_rec_set_ops):
// rec->ip is the branch, the function's second instruction; the literal
// is ALIGN_DOWN(ip - 12, 8).
func inlineSite(fn uint64) literalSite {
	ip := fn + 4
	lit := (ip - 12) &^ 7
	look := int(ip + 4 - lit)
	branchOff := int(ip - lit)
	return literalSite{ip: ip, lit: lit, look: look, condLo: lit, condHi: lit + uint64(look),
		parse: func(h string) (literalState, error) { return parseLiteralLook(h, branchOff) }}
}

// oolSite is ppc64le's callsite with its out-of-line stub at stub: the
// literal at stub - 8, then the stub's mflr r0 and bl; the callsite's
// branch to the stub, away from it. A look is the stub's 16 bytes, then
// the callsite's 4. The callsite is live when both the branch and the
// stub's bl are: its branch state is the bl then, a nop otherwise.
func oolSite(ip, stub uint64, nop uint32) literalSite {
	lit := stub - 8
	return literalSite{ip: ip, lit: lit, look: 16, look2: ip, look2Len: 4,
		condLo: min(lit, ip), condHi: max(stub+8, ip+4),
		parse: func(h string) (literalState, error) {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != 20 {
				return literalState{}, fmt.Errorf("race: literal look %q: want 20 bytes (the stub's 16, the callsite's 4)", h)
			}
			st := literalState{ops: binary.LittleEndian.Uint64(b), branch: binary.LittleEndian.Uint32(b[12:])}
			if site := binary.LittleEndian.Uint32(b[16:]); site == nop {
				st.branch = nop
			}
			return st, nil
		}}
}

// ppcBranchTarget decodes an unconditional relative branch without link
// (b) at ip: its target, or false.
func ppcBranchTarget(ip uint64, insn uint32) (uint64, bool) {
	if insn>>26 != 18 || insn&3 != 0 {
		return 0, false
	}
	off := int64(int32(insn&0x03fffffc<<6) >> 6)
	return uint64(int64(ip) + off), true
}

// ppcLocalEntry is where calls from inside the kernel enter fn: past
// its TOC setup (addis r2,r12 / addi r2,r2), which only calls through
// the global entry run.
func ppcLocalEntry(fn uint64, first uint32) uint64 {
	if first>>16 == 0x3c4c {
		return fn + 8
	}
	return fn
}

// ftraceNopOps is the ops a callsite's literal names while no ops is
// attached there.
const ftraceNopOps = "ftrace_nop_ops"

// ftraceListOps is the ops a callsite shared by several ops names.
const ftraceListOps = "ftrace_list_ops"

// literalStep is one transition of the walk: its name (the injection's
// action) and what it does.
type literalStep struct {
	name string
	do   func() error
}

// literalState is a CALL_OPS callsite as one look read it.
type literalState struct {
	ops    uint64
	branch uint32
}

// parseLiteralLook reads a look of the callsite from its literal: the
// literal's 8 bytes, then the branch at branchOff.
func parseLiteralLook(h string, branchOff int) (literalState, error) {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) < branchOff+4 || len(b) < 8 {
		return literalState{}, fmt.Errorf("race: literal look %q: want %d bytes", h, branchOff+4)
	}
	return literalState{ops: binary.LittleEndian.Uint64(b), branch: binary.LittleEndian.Uint32(b[branchOff:])}, nil
}

// misordered returns the first of states[1:] (states[0] is the callsite
// before the transition, judged with the one before) whose branch is live
// with the nop ops in its literal and that does not go on to a nop with
// the nop ops kept until then, or the last state is: ftrace_caller
// reached, for a callsite that stays live, through an ops that calls
// nothing. The way to a nop may take more than one write (ppc64le: the
// stub's bl back to ftrace_caller, then the callsite's branch). -1 when
// there is none.
func misordered(states []literalState, nopOps uint64, nop uint32) int {
	for k := 1; k < len(states); k++ {
		s := states[k]
		if s.branch == nop || s.ops != nopOps {
			continue
		}
		toNop := false
		for _, next := range states[k+1:] {
			if next.branch == nop {
				toNop = true
				break
			}
			if next.ops != nopOps {
				break
			}
		}
		if !toNop {
			return k
		}
	}
	return -1
}

// literalOrder walks fth_target_counted's callsite through its dispatch
// states with every write to it traced, and judges each transition.
func (r *Injector) literalOrder(ctx context.Context, n int) error {
	if err := options.CheckRaceTargets(options.RaceLiteral, runtime.GOARCH); err != nil {
		return fmt.Errorf("race: %w", err)
	}
	la := literalArches[runtime.GOARCH]
	tab, err := ksyms.Read(ksyms.DefaultPath, append([]string{ftraceNopOps, ftraceListOps}, la.writers...))
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	nopOps, ok := tab.Addr(ftraceNopOps)
	if !ok {
		return noCallOps()
	}
	var writers []uint64
	for _, w := range la.writers {
		a, ok := tab.Addr(w)
		if !ok {
			return fmt.Errorf("race: %s has no single %s: the literal target needs the arch's text writers (CONFIG_KALLSYMS)", ksyms.DefaultPath, w)
		}
		if la.outOfLine {
			first, err := r.peekWord(a)
			if err != nil {
				return err
			}
			a = ppcLocalEntry(a, first)
		}
		writers = append(writers, a)
	}
	listOps, _ := tab.Addr(ftraceListOps)
	fn, err := countedAddr()
	if err != nil {
		return err
	}
	a, dropA, err := targetInstance("fth_race_literal_a")
	if err != nil {
		return err
	}
	defer dropA()
	// The kernel's own arithmetic (ftrace_rec_set_ops).
	site := inlineSite(fn)
	if la.outOfLine {
		if site, err = r.oolLiteralSite(a, la.nop); err != nil {
			return err
		}
	}
	b, dropB, err := targetInstance("fth_race_literal_b")
	if err != nil {
		return err
	}
	defer dropB()
	loader, err := oracle.NewLoader(4, nil)
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	defer loader.Close()
	ld, err := loader.Load(fthtarget.Counted, oracle.FEntry, oracle.Key(oracle.FEntry, fthtarget.Counted))
	if err != nil {
		return fmt.Errorf("race: load a fentry program on %s: %w", fthtarget.Counted, err)
	}
	defer ld.Prog.Close()
	link := -1
	defer func() {
		if link >= 0 {
			unix.Close(link)
		}
	}()
	tracer := func(fs tracefs.FS, on bool) func() error {
		if on {
			return func() error { return fs.SetTracer(tracefs.Function) }
		}
		return func() error { return fs.SetTracer(tracefs.Nop) }
	}
	fentryOn := func() error {
		fd, errno := attach.LinkCreate(ld.Prog.FD(), oracle.FEntry.LinkType())
		if errno != 0 {
			return fmt.Errorf("attach fentry to %s: %w", fthtarget.Counted, errno)
		}
		link = fd
		return nil
	}
	fentryOff := func() error {
		err := unix.Close(link)
		link = -1
		return err
	}
	// From nop back to nop through every dispatch state: one ops, the
	// list ops, one ops beside a direct call, a direct call alone.
	steps := []literalStep{
		{"ops-on", tracer(a, true)},                 // nop -> one ops
		{"second-ops-on", tracer(b, true)},          // one ops -> list
		{"second-ops-off", tracer(b, false)},        // list -> one ops
		{"fentry-on-beside-ops", fentryOn},          // one ops -> ops + direct
		{"ops-off-beside-fentry", tracer(a, false)}, // ops + direct -> direct
		{"ops-on-beside-fentry", tracer(a, true)},   // direct -> ops + direct
		{"fentry-off-beside-ops", fentryOff},        // ops + direct -> one ops
		{"ops-off", tracer(a, false)},               // one ops -> nop
		{"fentry-on", fentryOn},                     // nop -> direct
		{"fentry-off", fentryOff},                   // direct -> nop
	}
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.name
	}
	w := r.oneInsnWindow(options.RaceLiteral, fthtarget.Counted, fn, 4, names)
	if r.env.Opts.RaceList {
		return nil
	}
	emit.Logf(r.env.W, "race: literal: every write to %s's callsite traced at %v (literal %#x, branch %#x, %s %#x, %s %#x)",
		fthtarget.Counted, la.writers, site.lit, site.ip, ftraceNopOps, nopOps, ftraceListOps, listOps)
	prev, err := r.lookLiteral(site)
	if err != nil {
		return err
	}
	sum := event.Oracle{Name: event.OracleCallsiteOrder, Function: fthtarget.Counted}
	for i := 0; w.wants(i, n) && ctx.Err() == nil && r.more(); i++ {
		st := steps[w.pos%len(steps)]
		in := &event.Injection{Target: options.RaceLiteral, Symbol: fmt.Sprintf("%s+%#x", fthtarget.Counted, 4), Offset: 4, Function: fthtarget.Counted, Action: st.name}
		r.seq++
		in.Seq, in.Addr = r.seq, fmt.Sprintf("%#x", site.ip)
		in.Outcome = event.InjReleased
		r.emit(*in)
		seen, final, took, actErr, err := r.traceWrites(la, writers, site, st.do)
		if err != nil {
			return err
		}
		in.ActionDone, in.ActionMS = actErr == nil, float64(took.Microseconds())/1000
		in.Insn, in.InsnAfter = prev, final
		o := judgeLiteral(in, append([]string{prev}, append(seen, final)...), site.parse, nopOps, listOps, la.nop, actErr)
		sum.Checks++
		if o != nil {
			sum.Failures++
			_ = r.env.W.Emit(event.Event{Kind: event.KindOracle, Oracle: o})
		}
		r.emit(*in)
		prev = final
		// Every step's outcome is its point's: a transition is not
		// tried again, the next one starts from where it left.
		w.pos++
	}
	sum.OK = sum.Failures == 0
	_ = r.env.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &sum})
	return nil
}

// oolLiteralSite finds ppc64le's out-of-line stub of fth_target_counted's
// callsite: rec->ip from tracefs, the stub from the branch the callsite
// holds while inst's tracer is on (off again before the walk starts).
func (r *Injector) oolLiteralSite(inst tracefs.FS, nop uint32) (literalSite, error) {
	ips, err := tracefs.New(tracefs.DefaultRoot).RecordIPs()
	if err != nil {
		return literalSite{}, fmt.Errorf("race: the literal target needs the callsite's address: %w", err)
	}
	ip, ok := ips[fthtarget.Counted]
	if !ok {
		return literalSite{}, fmt.Errorf("race: %s is not in available_filter_functions_addrs", fthtarget.Counted)
	}
	if err := inst.SetTracer(tracefs.Function); err != nil {
		return literalSite{}, fmt.Errorf("race: tracer on to find the out-of-line stub: %w", err)
	}
	insn, err := r.peekWord(ip)
	if offErr := inst.SetTracer(tracefs.Nop); err == nil {
		err = offErr
	}
	if err != nil {
		return literalSite{}, err
	}
	stub, ok := ppcBranchTarget(ip, insn)
	if !ok {
		return literalSite{}, fmt.Errorf("race: %s's callsite at %#x holds %08x while traced, not a branch to an out-of-line stub (CONFIG_PPC_FTRACE_OUT_OF_LINE)", fthtarget.Counted, ip, insn)
	}
	return oolSite(ip, stub, nop), nil
}

// peekWord reads the 32-bit word at addr through the host.
func (r *Injector) peekWord(addr uint64) (uint32, error) {
	b, err := r.Port.ReadText(addr, 4)
	if err != nil {
		return 0, err
	}
	if len(b) != 4 {
		return 0, fmt.Errorf("race: read at %#x: % x", addr, b)
	}
	return binary.LittleEndian.Uint32(b), nil
}

// lookLiteral reads the callsite as a trace stop does: both looks.
func (r *Injector) lookLiteral(site literalSite) (string, error) {
	h, err := r.Port.Peek(site.lit, site.look)
	if err != nil || site.look2Len == 0 {
		return h, err
	}
	h2, err := r.Port.Peek(site.look2, site.look2Len)
	return h + h2, err
}

// traceWrites runs action with every write to the callsite traced: the
// callsite as each write found it, in order, and after the action.
func (r *Injector) traceWrites(la literalArch, writers []uint64, site literalSite, action func() error) (seen []string, final string, took time.Duration, actErr, err error) {
	reg := la.addrReg
	tr := event.RaceMsg{Op: event.RaceTrace, Addrs: writers, Size: insnSize(), CondReg: &reg, CondAddr: site.condLo, CondEnd: site.condHi,
		LookAddr: site.lit, LookLen: site.look, Look2Addr: site.look2, Look2Len: site.look2Len, TimeoutMS: int(literalTraceLimit.Milliseconds())}
	if err := r.Send(tr); err != nil {
		return nil, "", 0, nil, err
	}
	if _, err := r.Expect(raceport.Reply, event.RaceArmed); err != nil {
		return nil, "", 0, nil, fmt.Errorf("race: trace %v: %w", writers, err)
	}
	start := time.Now()
	actErr = action()
	took = time.Since(start)
	if err := r.Send(event.RaceMsg{Op: event.RaceUntrace}); err != nil {
		return nil, "", took, actErr, err
	}
	m, err := r.Expect(literalTraceLimit+raceport.Slack, event.RaceUntraced)
	if err != nil {
		return nil, "", took, actErr, fmt.Errorf("race: untrace: %w", err)
	}
	for _, s := range m.Stops {
		seen = append(seen, s.Seen)
	}
	if m.Count > len(m.Stops) {
		return nil, "", took, actErr, fmt.Errorf("race: %d writes to one callsite in one transition, more than the %d kept", m.Count, len(m.Stops))
	}
	final, err = r.lookLiteral(site)
	return seen, final, took, actErr, err
}

// literalTraceLimit bounds one traced transition on the host.
const literalTraceLimit = 20 * time.Second

// judgeLiteral sets the outcome of one traced transition from the looks
// (before, each write's, after): wrong-state when a write left the
// callsite live with the nop ops in its literal other than on its way to
// a nop, and the oracle failure that titles it; missed when no write was
// seen, which every step of the walk makes.
func judgeLiteral(in *event.Injection, looks []string, parse func(string) (literalState, error), nopOps, listOps uint64, nop uint32, actErr error) *event.Oracle {
	states := make([]literalState, len(looks))
	for i, h := range looks {
		s, err := parse(h)
		if err != nil {
			in.Outcome, in.Msg = event.InjMissed, err.Error()
			return nil
		}
		states[i] = s
	}
	name := func(s literalState) string {
		ops := fmt.Sprintf("%#x", s.ops)
		switch s.ops {
		case nopOps:
			ops = ftraceNopOps
		case listOps:
			ops = ftraceListOps
		}
		br := fmt.Sprintf("%08x", s.branch)
		if s.branch == nop {
			br = "nop"
		}
		return ops + "/" + br
	}
	var walk []string
	for _, s := range states {
		walk = append(walk, name(s))
	}
	how := fmt.Sprintf("%d writes: %v", len(states)-2, walk)
	if actErr != nil {
		how += "; action: " + actErr.Error()
	}
	switch k := misordered(states, nopOps, nop); {
	case actErr != nil:
		in.Outcome, in.Msg = event.InjMissed, how
	case len(states) == 2:
		in.Outcome, in.Msg = event.InjMissed, "no write to the callsite was seen; "+how
	case k >= 0:
		in.Outcome = event.InjWrongState
		// looks[1] is the first write's view, the callsite as before:
		// state k is what write k-1 left.
		in.Msg = fmt.Sprintf("write %d of %d left the branch live with %s in the literal, and the callsite did not go to a nop next; %s", k-1, len(states)-2, ftraceNopOps, how)
		return &event.Oracle{Name: event.OracleCallsiteOrder, Function: in.Function, Msg: in.Msg,
			Title: fmt.Sprintf("callsite out of order: %s's branch live with %s in its literal during %s", in.Function, ftraceNopOps, in.Action)}
	default:
		in.Outcome, in.Msg = event.InjSurvived, how
	}
	return nil
}
