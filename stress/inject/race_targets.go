package inject

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/disasm"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// The race scenario's targets: where the task is held and what races it.

// trampolines injects at each instruction of the trampoline image of a
// program of kind in turn (its window): fentry (target RaceTrampoline) on
// fth_target_counted, fexit (RaceFexitTrampoline) on fth_target_napping. It
// replaces or detaches the program during the window: the image may be freed only
// after the preempted task left it (RCU-tasks; for fexit the image's
// percpu_ref too, around the program and the original function).
func (r *Injector) trampolines(ctx context.Context, n int, kind oracle.Kind) error {
	JITKallsymsOn(r.env.W)
	target, fn := options.RaceTrampoline, fthtarget.Counted
	if kind == oracle.FExit {
		target, fn = options.RaceFexitTrampoline, fthtarget.Napping
	}
	cache := btf.NewCache()
	loader, err := oracle.NewLoader(4, cache)
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	defer loader.Close()
	ld, err := loader.Load(fn, kind, oracle.Key(kind, fn))
	if err != nil {
		return fmt.Errorf("race: load a %s program on %s: %w", kind, fn, err)
	}
	// One program for every injection: only the trampoline image comes
	// and goes, so a crash is the image's, not the program's.
	defer ld.Prog.Close()
	actions := strings.Split(r.env.Opts.RaceAction, ",")
	var second *oracle.Loaded
	if slices.Contains(actions, options.RaceReplace) {
		if second, err = loader.Load(fn, kind, oracle.Key(kind, fn)+"#2"); err != nil {
			return fmt.Errorf("race: load a second %s program on %s: %w", kind, fn, err)
		}
		defer second.Prog.Close()
	}
	size := insnSize()
	images, err := r.newImageFinder("bpf_trampoline_", trampolineSyms)
	if err != nil {
		return err
	}
	defer images.close()
	// fd is the first program's link, kept from one injection to the
	// next: after a replace, detaching the second program alone makes
	// the kernel build a one-program image again, the next injection's
	// target, with one trampoline update where a detach of both and an
	// attach took two slow ones (riscv64 under TCG: 150-520 ms each,
	// against 10-25 ms for an attach). The last images' frees may then
	// come during the next hold: a free that waits for the held vCPU (an
	// IPI) holds the agent up too, and the host lets the vCPU go at the
	// arm's bound (raceReleaseBound), a missed injection.
	fd := -1
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	var (
		addr   uint64
		sym    string
		length int
		w      *insnWindow
		// origCall is the offset of the fexit image's call of the
		// function (fexitOrigCall), -1 until decoded.
		origCall = -1
	)
	for i := 0; w.wants(i, n) && ctx.Err() == nil && r.more(); i++ {
		if fd < 0 {
			if err := images.prepare(); err != nil {
				return fmt.Errorf("race: %w", err)
			}
			var errno unix.Errno
			if fd, errno = attach.LinkCreate(ld.Prog.FD(), kind.LinkType()); errno != 0 {
				fd = -1
				return fmt.Errorf("race: attach %s to %s: %w", kind, fn, errno)
			}
			var err error
			if addr, sym, length, err = images.found(); err != nil {
				return err
			}
		}
		w = r.decodeWindow(target, sym, addr, length, actions)
		// The fexit image's epilogue, after __bpf_tramp_exit, is covered
		// by the last of its three waits alone: the walk starts there.
		w.backwards = kind == oracle.FExit
		if kind == oracle.FExit && origCall == -1 {
			origCall = r.fexitOrigCall(w, fn)
		}
		if r.env.Opts.RaceList {
			return nil
		}
		at, action := w.place()
		in := &event.Injection{Target: target, Symbol: fmt.Sprintf("%s+%#x", sym, at.Off), Offset: at.Off, Asm: at.Text, Function: fn, Action: action}
		// The action runs beside the window (inject).
		var mu sync.Mutex
		fd2 := -1
		var act func() error
		switch action {
		case options.RaceReplace:
			act = func() error {
				l, errno := attach.LinkCreate(second.Prog.FD(), kind.LinkType())
				if errno != 0 {
					return fmt.Errorf("attach a second %s: %w", kind, errno)
				}
				mu.Lock()
				fd2 = l
				mu.Unlock()
				return nil
			}
		default:
			act = func() error {
				mu.Lock()
				l := fd
				fd = -1
				mu.Unlock()
				return unix.Close(l)
			}
		}
		call := counterCall
		if kind == oracle.FExit && at.Off <= origCall {
			// Held before the function is called, the task is in the
			// image's prologue, which its first wait covers as an
			// fentry image's: the action runs in the window, and the
			// task asks for no nap.
			call = raceCall{cmd: racer.NoNap, caller: fthtarget.NapCaller}
		} else if kind == oracle.FExit {
			// The action runs while the task naps inside the original
			// function, so that the image's first waits end before the
			// task, on its way out, reaches the point held.
			detach := act
			call = raceCall{cmd: racer.Nap, caller: fthtarget.NapCaller, beside: napBeside, window: fexitWindow, before: func() error {
				time.Sleep(napSettle)
				start := time.Now()
				if err := detach(); err != nil {
					return err
				}
				// The image's first wait (RCU-tasks, then the
				// percpu_ref's kill) must end while the task still
				// sleeps, or the task's exit is not the image's
				// last use: wait for it, and say when it ends late.
				waited, err := rcuTasksBarrier()
				if err != nil {
					return err
				}
				if took := time.Since(start); took > racer.NapTime()-napSettle {
					in.Msg = fmt.Sprintf("the image's first wait ended %v after the detach, after the task's nap (%v): its exit was not the image's last use", took.Round(time.Millisecond), racer.NapTime())
				} else {
					emit.Logf(r.env.W, "race: injection %d: the detached image's first wait ended %v after the detach (barrier %v)", r.seq, took.Round(time.Millisecond), waited.Round(time.Millisecond))
				}
				return nil
			}}
			act = func() error { return nil }
		}
		err := r.injectCall(call, in, addr+uint64(at.Off), size, act, true)
		mu.Lock()
		added, kept := fd2, fd
		mu.Unlock()
		if err != nil {
			if added >= 0 {
				unix.Close(added)
			}
			return err
		}
		w.done(in.Outcome)
		if added < 0 {
			// A detach closed fd already; a replace that failed
			// starts again from no program.
			if kept >= 0 {
				unix.Close(kept)
				fd = -1
			}
			continue
		}
		// The replacement image is listed now: it must not pass for
		// the one the second program's detach makes.
		if err := images.relist(); err != nil {
			unix.Close(added)
			return err
		}
		if err := images.prepare(); err != nil {
			unix.Close(added)
			return fmt.Errorf("race: %w", err)
		}
		unix.Close(added)
		if addr, sym, length, err = images.found(); err != nil {
			return err
		}
	}
	return nil
}

// fexitOrigCall is the offset in w of the fexit image's call of the
// traced function fn, the last instruction of its prologue: x86_64's
// call rel32 into fn, after its ftrace callsite. Where the image calls
// fn through a register (arm64, riscv64), and when the window was not
// decoded, it is -2: every point is taken for the epilogue.
func (r *Injector) fexitOrigCall(w *insnWindow, fn string) int {
	if w.err != nil {
		return -2
	}
	syms, err := ksyms.ReadModule(ksyms.DefaultPath, fthtarget.Module, []string{fn})
	if err != nil {
		emit.Logf(r.env.W, "race: fexittramp prologue: %v: every point taken for the epilogue", err)
		return -2
	}
	fnAddr, ok := syms.Addr(fn)
	if !ok {
		emit.Logf(r.env.W, "race: fexittramp prologue: %s has no %s: every point taken for the epilogue", ksyms.DefaultPath, fn)
		return -2
	}
	for _, in := range w.insns {
		if to, ok := disasm.CallTarget(runtime.GOARCH, w.addr, w.code, in); ok && to > fnAddr && to < fnAddr+fnCallsiteSpan {
			emit.Logf(r.env.W, "race: fexittramp prologue ends at +%#x (%s), the call of %s", in.Off, in.Text, fn)
			return in.Off
		}
	}
	emit.Logf(r.env.W, "race: fexittramp: no direct call of %s in the image: every point taken for the epilogue", fn)
	return -2
}

// fnCallsiteSpan bounds how far into a function an fexit image's call
// of it lands: past the ftrace callsite (x86_64's 5-byte nop, after an
// endbr64 under IBT).
const fnCallsiteSpan = 16

// callsites injects at the second instruction of fth_target_counted's
// patchable entry while it is disabled, and enables the function tracer
// on it during the window: a kernel that rewrites both instructions of
// the callsite under a preempted task (riscv's AUIPC+JALR before Linux
// 6.16) sends it through a half-old pair.
func (r *Injector) callsites(ctx context.Context, n int) error {
	off, err := secondInsnOffset()
	if err != nil {
		return err
	}
	fn, err := countedAddr()
	if err != nil {
		return err
	}
	inst, drop, err := targetInstance("fth_race")
	if err != nil {
		return err
	}
	defer drop()
	// The callsite as a disable leaves it, not as the module load's
	// ftrace_init_nop() did: the two can differ (a kernel that nops the
	// whole pair on disable but only the second slot at load).
	if !r.env.Opts.RaceList {
		if err := inst.SetTracer(tracefs.Function); err != nil {
			return fmt.Errorf("race: tracer on once before the callsite injections: %w", err)
		}
	}
	var w *insnWindow
	for i := 0; w.wants(i, n) && ctx.Err() == nil && r.more(); i++ {
		if err := inst.SetTracer(tracefs.Nop); err != nil {
			return fmt.Errorf("race: tracer off: %w", err)
		}
		// The window is one place, the instruction the enable rewrites.
		w = r.oneInsnWindow(options.RaceCallsite, fthtarget.Counted, fn, int(off), []string{"enable"})
		if r.env.Opts.RaceList {
			return nil
		}
		at, _ := w.place()
		in := &event.Injection{Target: options.RaceCallsite, Symbol: fmt.Sprintf("%s+%#x", fthtarget.Counted, off), Offset: int(off), Asm: at.Text, Function: fthtarget.Counted, Action: "enable"}
		enable := func() error { return inst.SetTracer(tracefs.Function) }
		if err := r.inject(in, fn+off, 2, enable, false); err != nil {
			return err
		}
		w.done(in.Outcome)
	}
	return inst.SetTracer(tracefs.Nop)
}

// targetInstance makes a tracefs instance whose function filter is
// fth_target_counted alone, and the function that removes it.
func targetInstance(name string) (tracefs.FS, func(), error) {
	inst, drop, err := tracefs.New(tracefs.DefaultRoot).FilteredInstance(name, fthtarget.Counted)
	if err != nil {
		return inst, nil, fmt.Errorf("race: %w", err)
	}
	return inst, drop, nil
}

// rcuTasksBarrier waits for the RCU-tasks callbacks queued so far (a
// detached fexit image's first wait among them) and says how long that
// took.
func rcuTasksBarrier() (time.Duration, error) {
	start := time.Now()
	fd, err := unix.Open(fthtarget.Barrier, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", fthtarget.Barrier, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("1")); err != nil {
		return 0, fmt.Errorf("%s: %w", fthtarget.Barrier, err)
	}
	return time.Since(start), nil
}

// napSettle is how long after the racer's nap started the fexit target's
// action runs: the task is asleep in fthtarget.Napping by then.
const napSettle = 100 * time.Millisecond

// napLag is how much longer than the racer's nap the one beside it
// (napBeside) sleeps.
const napLag = 300 * time.Millisecond

// fexitWindow is how long a fexit injection's task stays held: past the
// end of the nap beside it (napLag after the racer's), whose exit drops
// the image's last reference, by the image's last wait and free (a
// plain RCU grace period, then a worker, in the mutant that frees it
// early). The run's window (400 ms) ended before them in one of three
// campaign runs of that mutant.
const fexitWindow = napLag + 900*time.Millisecond

// napBeside naps in fthtarget.Napping from the agent's own CPU, beside the
// racer's nap on the held one, and napLag longer: the fexit image's last
// reference is then this task's, dropped on the agent's CPU while the
// racer is held in the epilogue. Dropped on the held CPU, by the racer
// itself, the last reference would queue the image's last wait there,
// and the free behind it (an RCU callback, then a per-CPU worker) could
// not run until the held task had left: the preemptor that holds it
// keeps every other task off that CPU. A function two tasks sleep in is
// the ordinary case the kernel must handle. It returns the wait for
// the nap's end.
func napBeside() func() error {
	done := make(chan error, 1)
	ms := []byte(strconv.FormatInt((racer.NapTime() + napLag).Milliseconds(), 10))
	go func() {
		fd, err := unix.Open(fthtarget.NapFile, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("%s: %w", fthtarget.NapFile, err)
			return
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, ms)
		done <- err
	}()
	return func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(raceReturnTimeout):
			return fmt.Errorf("the nap beside the racer did not end within %v", raceReturnTimeout)
		}
	}
}

// jitKallsyms makes the kernel list BPF images in kallsyms.
const jitKallsyms = "/proc/sys/net/core/bpf_jit_kallsyms"

// JITKallsymsOn has the kernel list trampoline images in kallsyms and
// announce them as symbol events: it does so only with BPF JIT symbols
// on, the default only on some arches. A failure is logged to w.
func JITKallsymsOn(w *emit.Writer) {
	if err := os.WriteFile(jitKallsyms, []byte("1"), 0); err != nil {
		emit.Logf(w, "%s: %v", jitKallsyms, err)
	}
}

// newImage finds the image the last attach made: a bpf_trampoline_ symbol
// that was not listed before it, or, when the new image took the place of
// a detached one, the one detached address still listed. While more than
// one detached image is listed (some not yet freed) it reads kallsyms
// again, for a few seconds.
func newImage(scan func() (map[uint64]string, error), name string, before map[uint64]string, detached map[uint64]bool) (uint64, string, map[uint64]string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err := scan()
		if err != nil {
			return 0, "", nil, err
		}
		var fresh, reused []uint64
		for a := range after {
			switch _, old := before[a]; {
			case !old:
				fresh = append(fresh, a)
			case detached[a]:
				reused = append(reused, a)
			}
		}
		switch {
		case len(fresh) == 1:
			return fresh[0], after[fresh[0]], after, nil
		case len(fresh) == 0 && len(reused) == 1:
			return reused[0], after[reused[0]], after, nil
		case len(fresh) == 0 && len(reused) == 0:
			return 0, "", nil, fmt.Errorf("race: no new %s symbol in %s after the attach (kptr_restrict, or %s off)", name, ksyms.DefaultPath, jitKallsyms)
		}
		if time.Now().After(deadline) {
			return 0, "", nil, emit.Unjudged(fmt.Errorf("race: cannot tell the new %s image among %d new and %d reused places (%s)", name, len(fresh), len(reused), listPlaces(after, append(fresh, reused...))))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// listPlaces names addrs as kallsyms does, for an error a developer can
// check against the guest's kallsyms.
func listPlaces(syms map[uint64]string, addrs []uint64) string {
	slices.Sort(addrs)
	var b strings.Builder
	for i, a := range addrs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s@%#x", syms[a], a)
	}
	return b.String()
}

// trampolineSyms reads the trampoline images of kallsyms by address.
func trampolineSyms() (map[uint64]string, error) {
	return kallsymsImages(parseTrampolineSyms)
}

// kallsymsImages reads kallsyms through parse, which keeps the images of
// one kind by address.
func kallsymsImages(parse func(io.Reader) (map[uint64]string, error)) (map[uint64]string, error) {
	f, err := os.Open(ksyms.DefaultPath)
	if err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	defer f.Close()
	out, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("race: %s: %w", ksyms.DefaultPath, err)
	}
	return out, nil
}

// parseTrampolineSyms keeps the lines of kallsyms that are BPF trampoline
// images: "bpf_trampoline_<key>" in the [bpf] pseudo-module. The kernel's
// own functions share the prefix (bpf_trampoline_put, _update, ...): taken
// for images, they were listed at every look, and once a new image took
// the place of the last one they made it one of thirteen.
func parseTrampolineSyms(r io.Reader) (map[uint64]string, error) {
	out := map[uint64]string{}
	err := ksyms.Each(r, func(s ksyms.Sym) {
		key, ok := strings.CutPrefix(s.Name, "bpf_trampoline_")
		if !ok || s.Module != "bpf" || s.Addr == 0 {
			return
		}
		if _, err := strconv.ParseUint(key, 10, 64); err == nil {
			out[s.Addr] = s.Name
		}
	})
	return out, err
}

// insnSize is the breakpoint's kind for an instruction of a trampoline:
// x86 counts bytes (1 does), the others a word.
func insnSize() int {
	if runtime.GOARCH == "amd64" {
		return 1
	}
	return 4
}

// secondInsnOffset is where the second instruction of a patchable function
// entry lies: riscv64 patches AUIPC+JALR (Linux 7.x only the JALR), arm64
// a MOV and a BL. x86 patches one 5-byte call: it has no second
// instruction to stop at.
func secondInsnOffset() (uint64, error) {
	if err := options.CheckRaceTargets(options.RaceCallsite, runtime.GOARCH); err != nil {
		return 0, fmt.Errorf("race: %w", err)
	}
	return 4, nil
}

// opsTrampolines injects at each instruction in turn of the trampoline x86
// allocates for a dynamic ftrace_ops, a function tracer instance's filtered
// to fth_target_counted (the callsite's only ops, so the callsite calls it
// directly), and switches the instance's tracer off during the window:
// ftrace_shutdown() unregisters the ops and may free its trampoline only
// after synchronize_rcu_tasks() let the held task out of it.
func (r *Injector) opsTrampolines(ctx context.Context, n int) error {
	if err := options.CheckRaceTargets(options.RaceOpsTrampoline, runtime.GOARCH); err != nil {
		return fmt.Errorf("race: %w", err)
	}
	inst, drop, err := targetInstance("fth_race_ops")
	if err != nil {
		return err
	}
	defer drop()
	images, err := r.newImageFinder(ftraceTrampolineSym, opsTrampolineSyms)
	if err != nil {
		return err
	}
	defer images.close()
	var w *insnWindow
	for i := 0; w.wants(i, n) && ctx.Err() == nil && r.more(); i++ {
		if err := images.prepare(); err != nil {
			return fmt.Errorf("race: %w", err)
		}
		if err := inst.SetTracer(tracefs.Function); err != nil {
			return fmt.Errorf("race: function tracer on %s: %w", fthtarget.Counted, err)
		}
		addr, sym, length, err := images.found()
		if err != nil {
			_ = inst.SetTracer(tracefs.Nop)
			return err
		}
		w = r.decodeWindow(options.RaceOpsTrampoline, sym, addr, length, []string{raceTracerOff})
		if r.env.Opts.RaceList {
			return inst.SetTracer(tracefs.Nop)
		}
		at, _ := w.place()
		in := &event.Injection{Target: options.RaceOpsTrampoline, Symbol: fmt.Sprintf("%s+%#x", sym, at.Off), Offset: at.Off, Asm: at.Text, Function: fthtarget.Counted, Action: raceTracerOff}
		off := func() error { return inst.SetTracer(tracefs.Nop) }
		if err := r.inject(in, addr+uint64(at.Off), insnSize(), off, true); err != nil {
			return err
		}
		w.done(in.Outcome)
	}
	return nil
}

// raceTracerOff is the ops trampoline's action: the function tracer
// instance switched to nop, which unregisters its ftrace_ops.
const raceTracerOff = "tracer-off"

// ftraceTrampolineSym is the kallsyms name of every ftrace_ops trampoline,
// in the [__builtin__ftrace] pseudo-module.
const (
	ftraceTrampolineSym = "ftrace_trampoline"
	ftraceTrampolineMod = "__builtin__ftrace"
)

// opsTrampolineSyms reads the ftrace_ops trampolines of kallsyms by
// address.
func opsTrampolineSyms() (map[uint64]string, error) {
	return kallsymsImages(parseOpsTrampolineSyms)
}

// parseOpsTrampolineSyms keeps the ftrace_trampoline lines of the
// [__builtin__ftrace] pseudo-module: every ops trampoline has that name,
// so an image is told by its address.
func parseOpsTrampolineSyms(r io.Reader) (map[uint64]string, error) {
	out := map[uint64]string{}
	err := ksyms.EachBeforeBPF(r, func(s ksyms.Sym) {
		if s.Name == ftraceTrampolineSym && s.Module == ftraceTrampolineMod && s.Addr != 0 {
			out[s.Addr] = s.Name
		}
	})
	return out, err
}

// callOps injects at each instruction in turn of ftrace_caller's CALL_OPS
// window (disasm.OpsCall: from the load of the callsite's ops literal to
// the call of op->func) on the way into fth_target_counted, traced by a
// function tracer instance of its own, the callsite's only ops, and removes
// the instance during the window: the tracer goes off, then the instance
// and its ftrace_ops are freed. ftrace_shutdown() waits for RCU-tasks
// before it returns, so a correct kernel frees the ops only after the held
// task has called through it; without that wait the task calls through
// freed memory, which init_on_free=1 (the harness boots race cells of
// CALL_OPS arches with it) has zeroed. A fresh instance each injection:
// the action removes it.
func (r *Injector) callOps(ctx context.Context, n int) error {
	if err := options.CheckRaceTargets(options.RaceCallOps, runtime.GOARCH); err != nil {
		return fmt.Errorf("race: %w", err)
	}
	tab, err := ksyms.Read(ksyms.DefaultPath, []string{ftraceCaller, ftraceNopOps})
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	if _, ok := tab.Addr(ftraceNopOps); !ok {
		return noCallOps()
	}
	addr, ok := tab.Addr(ftraceCaller)
	if !ok {
		return fmt.Errorf("race: %s has no %s", ksyms.DefaultPath, ftraceCaller)
	}
	w := r.decodeWith(options.RaceCallOps, ftraceCaller, addr, 0, []string{raceInstanceRm}, disasm.OpsCall)
	if r.env.Opts.RaceList {
		return nil
	}
	for i := 0; w.wants(i, n) && ctx.Err() == nil && r.more(); i++ {
		name := fmt.Sprintf("fth_race_callops_%d", i)
		inst, drop, err := targetInstance(name)
		if err != nil {
			return err
		}
		if err := inst.SetTracer(tracefs.Function); err != nil {
			drop()
			return fmt.Errorf("race: function tracer on %s: %w", fthtarget.Counted, err)
		}
		at, _ := w.place()
		in := &event.Injection{Target: options.RaceCallOps, Symbol: fmt.Sprintf("%s+%#x", ftraceCaller, at.Off), Offset: at.Off, Asm: at.Text, Function: fthtarget.Counted, Action: raceInstanceRm}
		rm := func() error {
			if err := inst.SetTracer(tracefs.Nop); err != nil {
				return err
			}
			return tracefs.New(tracefs.DefaultRoot).RemoveInstance(name)
		}
		err = r.inject(in, addr+uint64(at.Off), insnSize(), rm, false)
		drop() // gone already, unless the action failed
		if err != nil {
			return err
		}
		w.done(in.Outcome)
	}
	return nil
}

// ftraceCaller is where every CALL_OPS callsite calls: the ops window's
// code.
const ftraceCaller = "ftrace_caller"

// raceInstanceRm is the CALL_OPS window's action: the function tracer
// instance switched to nop and removed, which frees its ftrace_ops.
const raceInstanceRm = "instance-rm"

// countedAddr is fth_target_counted's address, from kallsyms.
func countedAddr() (uint64, error) {
	fn, err := fthtarget.CountedAddr()
	if err != nil {
		return 0, fmt.Errorf("race: %w", err)
	}
	return fn, nil
}
