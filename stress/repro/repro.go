// Package repro is scenario=repro's sequences: each is one order of
// operations, run step by step and each step logged, that makes a known
// finding show at once where the churn meets it once in half an hour; each
// has a control, the same steps with one change, that must stay clean.
// The kernel's report is the verdict, as in every scenario; a step the
// kernel refuses is logged and the sequence goes on, so that what the
// refusal left behind is seen too. A sequence that races two CPUs has the
// host hold them at exact instructions through the race port
// (stress/raceport, stress/inject's Holds).
package repro

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/inject"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// callsAfter is how long the callers run after the last step, before the
// redirecting user is detached and judged.
const callsAfter = time.Second

// Env is what the sequences take from the agent that runs them.
type Env struct {
	// W receives the sequences' events and log lines.
	W *emit.Writer
	// Opts are the run's options: Repro names the sequence.
	Opts options.Options
	// NumCPU is the guest's CPU count: a sequence that holds vCPUs needs
	// two.
	NumCPU int
	// VirtioDir and DevDir are where the race port's device is found
	// (raceport.Open).
	VirtioDir, DevDir string
	// Sleep waits; nil is time.Sleep.
	Sleep func(time.Duration)
	// WatchImages starts watching the kernel's symbol events, so that a
	// fault in a freed BPF image is named after it, and returns what
	// stops the watch; nil watches nothing.
	WatchImages func(context.Context) (stop func())
	// Livepatch applies (Attach) and disables (Detach) the livepatch
	// the ipmodify-mid-update sequences put on deliver.FuncSeq, whose
	// module the steps name LivepatchModule; nil when it cannot be
	// applied here, and NoLivepatch says why.
	Livepatch       deliver.External
	LivepatchModule string
	NoLivepatch     string
}

// Run runs the sequence env.Opts.Repro names.
func Run(ctx context.Context, env Env) error {
	run, ok := sequences[env.Opts.Repro]
	if !ok {
		return fmt.Errorf("repro: unknown sequence %q (want one of %v)", env.Opts.Repro, options.Repros())
	}
	if env.Sleep == nil {
		env.Sleep = time.Sleep
	}
	return run(&sequence{env}, ctx)
}

// sequence is one run of a sequence with its Env: the sequences and
// their shared steps are its methods.
type sequence struct{ Env }

// logf logs one line of a repro sequence.
func (sq *sequence) logf(format string, args ...any) {
	emit.Logf(sq.W, "repro: "+format, args...)
}

// watchImages starts the symbol watch (Env.WatchImages) and returns what
// stops it.
func (sq *sequence) watchImages(ctx context.Context) (stop func()) {
	if sq.WatchImages == nil {
		return func() {}
	}
	return sq.WatchImages(ctx)
}

// step is one operation of a repro sequence, as its log line says it.
type step struct {
	what string
	do   func() error
}

// sequences runs each sequence options.Repros names, and its
// control.
var sequences = map[string]func(sq *sequence, ctx context.Context) error{
	options.ReproIPModifyFilter:              func(sq *sequence, ctx context.Context) error { return sq.ipModify(ctx, true) },
	options.ReproIPModifyRegister:            func(sq *sequence, ctx context.Context) error { return sq.ipModify(ctx, false) },
	options.ReproDirectUnregisterFree:        func(sq *sequence, ctx context.Context) error { return sq.directFree(ctx, true, false) },
	options.ReproDirectUnregisterLive:        func(sq *sequence, ctx context.Context) error { return sq.directFree(ctx, false, false) },
	options.ReproDirectUnregisterFreeTracefs: func(sq *sequence, ctx context.Context) error { return sq.directFree(ctx, true, true) },
	options.ReproDirectUnregisterLiveTracefs: func(sq *sequence, ctx context.Context) error { return sq.directFree(ctx, false, true) },
	options.ReproMapperRemoveFree:            func(sq *sequence, ctx context.Context) error { return sq.mapperFree(ctx, true) },
	options.ReproMapperRemoveLive:            func(sq *sequence, ctx context.Context) error { return sq.mapperFree(ctx, false) },
	options.ReproEAgainFree:                  func(sq *sequence, ctx context.Context) error { return sq.eagain(ctx, true) },
	options.ReproEAgainPeer:                  func(sq *sequence, ctx context.Context) error { return sq.eagain(ctx, false) },
	options.ReproIPModifyMidUpdate:           func(sq *sequence, ctx context.Context) error { return sq.midUpdate(ctx, true) },
	options.ReproIPModifyMidUpdatePeer:       func(sq *sequence, ctx context.Context) error { return sq.midUpdate(ctx, false) },
	options.ReproRefusedDirect:               func(sq *sequence, ctx context.Context) error { return sq.refusedDirect(ctx, true) },
	options.ReproRefusedDirectAccepted:       func(sq *sequence, ctx context.Context) error { return sq.refusedDirect(ctx, false) },
}

// deliverMod is fth_deliver.ko loaded for a repro sequence, with BPF
// programs to link on its functions.
type deliverMod struct {
	mod    deliver.Module
	loader *oracle.Loader
	links  []int
	close  func()
}

// loadDeliver loads fth_deliver.ko and a loader of up to progs programs;
// close unlinks them and unloads the module.
func (sq *sequence) loadDeliver(progs int) (*deliverMod, error) {
	path := filepath.Join(modload.DefaultDir, deliver.ModuleName+".ko")
	if err := modload.Load(path, ""); err != nil {
		return nil, fmt.Errorf("repro: load %s: %w", path, err)
	}
	modload.LogLoaded(sq.W, deliver.ModuleName)
	unload := func() {
		if err := modload.UnloadRetry(tally.New(sq.W, 0), deliver.ModuleName, 20); err != nil {
			sq.logf("unload %s: %v", deliver.ModuleName, err)
		}
	}
	loader, err := oracle.NewLoader(progs, nil)
	if err != nil {
		unload()
		return nil, fmt.Errorf("repro: %w", err)
	}
	d := &deliverMod{mod: deliver.Module{Dir: deliver.DefaultDir}, loader: loader}
	d.close = func() {
		for _, fd := range d.links {
			unix.Close(fd)
		}
		loader.Close()
		unload()
	}
	return d, nil
}

// unlinkLast closes the last link made.
func (d *deliverMod) unlinkLast() {
	if n := len(d.links); n > 0 {
		unix.Close(d.links[n-1])
		d.links = d.links[:n-1]
	}
}

// link loads a program of kind on fn and links it; the link stays until
// close.
func (d *deliverMod) link(fn string, kind oracle.Kind, key string) error {
	link, err := d.linkLater(fn, kind, key)
	if err != nil {
		return err
	}
	return link()
}

// linkLater loads a program of kind on fn now and returns what links it:
// a sequence that holds a CPU links with nothing else to do in the kernel
// (a program's load frees kernel memory, whose TLB flush waits for every
// CPU, the held one too).
func (d *deliverMod) linkLater(fn string, kind oracle.Kind, key string) (func() error, error) {
	ld, err := d.loader.Load(fn, kind, key)
	if err != nil {
		return nil, err
	}
	return func() error {
		defer ld.Prog.Close()
		fd, errno := attach.LinkCreate(ld.Prog.FD(), kind.LinkType())
		if errno != 0 {
			return errno
		}
		d.links = append(d.links, fd)
		return nil
	}, nil
}

// doSteps does steps in order, each logged as "i/total what: done"; the
// first the kernel refuses ends the sequence with its error, since the
// steps after it depend on it.
func (sq *sequence) doSteps(steps []step, total int) error {
	for i, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("repro: %d/%d %s: %w", i+1, total, s.what, err)
		}
		sq.logf("%d/%d %s: done", i+1, total, s.what)
	}
	return nil
}

// awaitWrite waits for a held writer's operation, what, to return once
// the holds are done, and logs how it ended: refused is a result too.
func (sq *sequence) awaitWrite(written <-chan error, what string) {
	select {
	case err := <-written:
		if err != nil {
			sq.logf("%s: %v", what, err)
		} else {
			sq.logf("%s: done", what)
		}
	case <-time.After(30 * time.Second):
		sq.logf("%s: not back after 30 s", what)
	}
}

// emitModuleFindings reads fth_deliver.ko's findings and emits each as a
// failed delivery oracle, the verdict's input.
func (sq *sequence) emitModuleFindings(mod deliver.Module) ([]deliver.Finding, error) {
	fs, err := mod.Findings()
	if err != nil {
		return nil, fmt.Errorf("repro: read the module's findings: %w", err)
	}
	for _, f := range fs {
		o := f.Oracle()
		_ = sq.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &o})
	}
	return fs, nil
}

// onCPU0 runs write on a thread of its own pinned to CPU 0, the CPU a
// repro's host holds the writer on, and sends its result.
func onCPU0(write func() error) <-chan error {
	return racer.OnCPU(0, func(int) error { return write() })
}

// ipModify (ipmodify-filter): 7.3's BPF trampolines share one direct ftrace_ops,
// and update_ftrace_direct_mod() runs the IPMODIFY handshake
// (__ftrace_hash_update_ipmodify with update_target) over that ops' whole
// filter, every traced function, not only the one being modified. A
// function whose record has an IPMODIFY ops but whose trampoline never
// agreed to share with it (an fexit trampoline that calls the original
// without ORIG_STACK) is then asked, by a stranger that does not hold its
// lock, to share: it sets BPF_TRAMP_F_SHARE_IPMODIFY and answers -EAGAIN,
// the stranger retries, and the second ask warns in
// bpf_tramp_ftrace_ops_func. The record gets there because an enabled
// IPMODIFY ops that takes a function into its filter (ftrace_set_filter)
// sets FTRACE_FL_IPMODIFY without prepare_direct_functions_for_ipmodify(),
// the handshake a registration runs. Without filterLater
// (ipmodify-register, the control) the ops has both functions in its filter
// when it registers, the handshake runs, and nothing should warn.
func (sq *sequence) ipModify(ctx context.Context, filterLater bool) error {
	logf := sq.logf
	d, err := sq.loadDeliver(4)
	if err != nil {
		return err
	}
	defer d.close()
	mod, link := d.mod, d.link
	steps := []step{
		{"attach a BPF fexit to " + deliver.FuncOther + " (its trampoline calls the original: CALL_ORIG, no IPMODIFY peer yet)",
			func() error { return link(deliver.FuncOther, oracle.FExit, "fexit-other") }},
		{"register fth_deliver.ko's IPMODIFY ftrace_ops (ops-ipmodify), filtered to " + deliver.FuncSeq,
			func() error { return mod.Attach("ops-ipmodify") }},
		{"add " + deliver.FuncOther + " to the enabled ops-ipmodify's filter (ftrace_set_filter: no handshake with the fexit trampoline there)",
			func() error { return mod.Filter("ops-ipmodify", true) }},
		{"attach a BPF fentry to " + deliver.FuncSeq + " (registers its trampoline in the shared direct ops)",
			func() error { return link(deliver.FuncSeq, oracle.FEntry, "fentry-seq") }},
		{"attach a second BPF fentry to " + deliver.FuncSeq + " (modifies that trampoline: update_ftrace_direct_mod)",
			func() error { return link(deliver.FuncSeq, oracle.FEntry, "fentry-seq#2") }},
	}
	if !filterLater {
		steps[1], steps[2] = step{"add " + deliver.FuncOther + " to ops-ipmodify's filter before it registers",
			func() error { return mod.Filter("ops-ipmodify", true) }},
			step{"register ops-ipmodify, filtered to " + deliver.FuncSeq + " and " + deliver.FuncOther + " (the registration's handshake makes the fexit trampoline share)",
				func() error { return mod.Attach("ops-ipmodify") }}
	}
	// The callers run throughout: ops-ipmodify redirects each call to a
	// replacement that counts it, and its detach judges the calls made
	// while it was attached (a call that ran the original instead is
	// missed: the redirect bypassed).
	if err := mod.Run(true); err != nil {
		return fmt.Errorf("repro: start the callers: %w", err)
	}
	for i, s := range steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.do(); err != nil {
			logf("%d/%d %s: %v", i+1, len(steps), s.what, err)
			continue
		}
		logf("%d/%d %s: done", i+1, len(steps), s.what)
	}
	sq.Sleep(callsAfter)
	if err := mod.Detach("ops-ipmodify"); err != nil {
		logf("detach ops-ipmodify: %v", err)
	}
	if err := mod.Run(false); err != nil {
		logf("stop the callers: %v", err)
	}
	fs, err := sq.emitModuleFindings(mod)
	if err != nil {
		return err
	}
	users, err := mod.Users()
	if err != nil {
		return fmt.Errorf("repro: read the module's users: %w", err)
	}
	for _, u := range users {
		if u.Name == "ops-ipmodify" {
			logf("ops-ipmodify: %d calls checked, %d missed-call findings", u.Checked, len(fs))
		}
	}
	return nil
}

// raceHolds is the race port of a repro sequence that holds vCPUs
// (inject.Holds), with the sequences' own reads of kernel code.
type raceHolds struct{ inject.Holds }
