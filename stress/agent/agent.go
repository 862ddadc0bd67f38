package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/churnrun"
	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/inventory"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/stress/repro"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// agent holds one run's state, so that finish can release whatever the steps
// got to create.
type agent struct {
	sys  system
	opts options.Options
	w    *emit.Writer
	// stopImages ends the image watch (watchImages); it may be called
	// more than once.
	stopImages func()

	selected  int
	attached  int
	set       *attach.Set
	ham       *hammer.Hammer
	hamDone   bool
	detachedN bool // the detach phase ran with a count, leaving links on purpose

	// churn is what made the churn stage not ok (churnrun.Run); zero in
	// the other scenarios.
	churn churnrun.Result
	// race counts the race scenario's injection outcomes; nil elsewhere.
	race map[string]int
	// raceUntil bounds the injections of the campaign's race stage.
	raceUntil time.Time
	// inCampaign is set in the campaign's race stage, whose racetarget
	// auto is every target the arch has.
	inCampaign bool
	// events is the event channel under w: the campaign's race stage
	// writes to it directly.
	events io.Writer
}

// The agent's modes are subcommands: what the binary is for, apart from
// the scenario options (wire/options) a run takes.
const (
	// modeRun, no subcommand, runs a scenario: in the harness VM, started
	// by init with its options on the kernel command line.
	modeRun = ""
	// modeSession runs a scenario inside an SSH session (fth soak): it
	// stops itself when the session's stdin reaches EOF.
	modeSession = "session"
	// modeKmsgStream copies /dev/kmsg to stdout until stdin closes: the
	// soak's kernel log stream. It takes no options.
	modeKmsgStream = "kmsgstream"
	// modeBoard makes the VM stand in for an SSH board (fth boardvm,
	// which asks for it with fth.board=1 on the kernel command line).
	modeBoard = "board"
	// modeSpin is one spinning SCHED_FIFO process of crash=rt-inversion
	// (see spinMain): agent spin <cpu> <priority>.
	modeSpin = "spin"
	// racer.ModeRacer and racer.ModePreempt are the race scenario's helpers (stress/racer),
	// repro.ModeLinker a repro sequence's (stress/repro).
)

// splitMode takes the subcommand off args.
func splitMode(args []string) (string, []string) {
	if len(args) > 0 {
		switch args[0] {
		case modeSession, modeKmsgStream, modeBoard, modeSpin, racer.ModeRacer, racer.ModePreempt, modeRaceCtl, modeRaceStage, repro.ModeLinker:
			return args[0], args[1:]
		}
	}
	return modeRun, args
}

// run is the whole agent: in a scenario mode it always emits Done (when any
// channel can be opened) and, if poweroff is set, reboots the guest after it.
func run(ctx context.Context, args []string, sys system) error {
	mode, args := splitMode(args)
	cmdline, err := sys.readFile(cmdlinePath)
	if err != nil || sys.getenv("FTH_NO_CMDLINE") == "1" {
		// Not in a VM, no /proc, or deployed on a board whose command line
		// belongs to someone else: flags only.
		cmdline = nil
	}
	var addr string
	if mode == modeRun {
		var board bool
		if board, addr = boardFromCmdline(cmdline); board {
			mode = modeBoard
		}
	}
	switch mode {
	case modeSpin:
		return spinMain(args)
	case racer.ModeRacer:
		return racer.RacerMain(args)
	case racer.ModePreempt:
		return racer.PreemptMain(args)
	case repro.ModeLinker:
		return repro.LinkerMain(args)
	case modeRaceCtl:
		return raceCtlMain(ctx, args, sys)
	case modeRaceStage:
		return raceStageMain(ctx, args, sys)
	case modeBoard:
		if addr == "" {
			addr = defaultBoardAddr
		}
		if len(args) > 0 {
			return fmt.Errorf("agent board: takes no arguments, got %q", args)
		}
		return runBoard(ctx, addr, sys.stdout)
	case modeKmsgStream:
		// Never a stress run where only a log stream was asked for.
		if len(args) > 0 {
			return fmt.Errorf("agent kmsgstream: takes no options, got %q", args)
		}
		if sys.stdin != nil {
			var end func()
			ctx, sys, end = startSession(ctx, sys)
			defer end()
		}
		// The first line names the stream's pid, so that the soak can
		// stop a stale stream after a blip; the kmsg parser skips it.
		fmt.Fprintf(sys.stdout, "%s%d\n", event.KmsgStreamPIDPrefix, sys.pid)
		return streamKmsg(ctx, sys.kmsgPath, sys.stdout)
	}
	env := options.Env{NumCPU: sys.numCPU, Poweroff: sys.ppid == 1 && inVM(sys, string(cmdline))}
	opts, optErr := options.Parse(args, string(cmdline), env, sys.stderr)
	if optErr != nil {
		// The channel and poweroff still follow the defaults, so the host
		// learns why the run failed instead of timing out.
		opts = options.Defaults(env)
	}
	opts.ResolveSeed(sys.now())
	if mode == modeSession && sys.stdin != nil {
		var end func()
		ctx, sys, end = startSession(ctx, sys)
		defer end()
	}

	ch, err := emit.Open(opts.Events, sys.virtioDir, sys.devDir, sys.stdout)
	if err != nil {
		fmt.Fprintf(sys.stderr, "agent: %v; writing events to stdout\n", err)
		ch, _ = emit.Open("-", "", "", sys.stdout)
	}
	defer ch.Close()
	if ch.Warning != "" {
		fmt.Fprintf(sys.stderr, "agent: warning: %s\n", ch.Warning)
	}

	a := &agent{sys: sys, opts: opts, w: emit.NewWriter(ch.W), events: ch.W, set: attach.NewSet()}
	// debugfs first: Hello reads the preemption model from it.
	mountErr := sys.mountFS()
	a.hello(ch.Path, optErr == nil)
	if mountErr != nil {
		emit.Logf(a.w, "mount: %v", mountErr)
	}
	if opts.LogLevel > 0 {
		if err := sys.consoleLevel(opts.LogLevel); err != nil {
			emit.Logf(a.w, "console log level %d: %v", opts.LogLevel, err)
		}
	}
	if ch.Warning != "" {
		emit.Logf(a.w, "warning: %s", ch.Warning)
	}

	runErr := optErr
	if runErr == nil {
		runErr = a.execute(ctx)
	}
	return a.finish(runErr)
}

// inVM reports whether the agent runs inside the harness VM. It gates the
// poweroff default: rebooting must never be the default on a developer's
// machine, even for a process that got reparented to PID 1.
func inVM(sys system, cmdline string) bool {
	if sys.getenv("FTH_IN_VM") == "1" {
		return true
	}
	if len(options.ParseCmdline(cmdline)) > 0 {
		return true
	}
	_, err := emit.FindPort(sys.virtioDir, emit.PortName)
	return err == nil
}

func (a *agent) hello(path string, optsOK bool) {
	h := &event.Hello{KernelRelease: a.sys.release(), CPUs: a.sys.numCPU, PID: a.sys.pid}
	if b, err := a.sys.readFile(preemptPath); err == nil {
		h.PreemptModel = parsePreempt(string(b))
	}
	if optsOK {
		// Args holds options only, as given ("auto" rather than the port
		// found), so that they reproduce the run on another VM.
		h.Args = a.opts.Args()
	}
	_ = a.w.Emit(event.Event{Kind: event.KindHello, Hello: h})
	emit.Logf(a.w, "events on %s", path)
}

// scenario is how the agent runs one scenario.
type scenario struct {
	// inventoried scenarios take the inventory first and run with it;
	// the others (the race, a repro sequence, a standalone reproducer)
	// need their own module's functions only, and get neither.
	inventoried bool
	// watchImages names a trap in a freed trampoline after it: not in the
	// bench, whose timings a poller would perturb.
	watchImages bool
	run         func(a *agent, ctx context.Context, cache *btf.Cache, inv inventory.Result) error
}

// scenarios is every scenario the agent runs, by its option value.
func scenarios() map[event.Scenario]scenario {
	return map[event.Scenario]scenario{
		options.ScenarioStorm:    {inventoried: true, watchImages: true, run: (*agent).executeStorm},
		options.ScenarioChurn:    {inventoried: true, watchImages: true, run: (*agent).executeChurn},
		options.ScenarioCampaign: {inventoried: true, watchImages: true, run: (*agent).executeChurn},
		options.ScenarioBench:    {inventoried: true, run: (*agent).executeBench},
		options.ScenarioRace: {run: func(a *agent, ctx context.Context, _ *btf.Cache, _ inventory.Result) error {
			return a.executeRace(ctx)
		}},
		options.ScenarioRepro: {run: func(a *agent, ctx context.Context, _ *btf.Cache, _ inventory.Result) error {
			env := repro.Env{W: a.w, Opts: a.opts, NumCPU: a.sys.numCPU, VirtioDir: a.sys.virtioDir, DevDir: a.sys.devDir,
				Sleep: a.sys.sleep, WatchImages: a.watchImages, LivepatchModule: deliver.KLPModule}
			if env.NoLivepatch = deliver.NoLivepatch(); env.NoLivepatch == "" {
				env.Livepatch = deliver.NewKLPUser(ctx, tally.New(a.w, 0), a.w)
			}
			return repro.Run(ctx, env)
		}},
		options.ScenarioStandalone: {run: func(a *agent, ctx context.Context, _ *btf.Cache, _ inventory.Result) error {
			return a.executeStandalone(ctx)
		}},
	}
}

// execute runs the scenario's steps. An error means a phase could not run.
func (a *agent) execute(ctx context.Context) error {
	sc, ok := scenarios()[a.opts.Scenario]
	if !ok {
		// The option table refuses any other value: a scenario added
		// there and not here.
		return fmt.Errorf("scenario %q: the agent has no way to run it", a.opts.Scenario)
	}
	if !sc.inventoried {
		return sc.run(a, ctx, nil, inventory.Result{})
	}
	a.stopImages = func() {}
	if sc.watchImages {
		a.stopImages = a.watchImages(ctx)
	}
	defer a.stopImages()
	// One cache for the whole run: the inventory and every program load
	// share the single parse of vmlinux BTF it holds.
	cache := btf.NewCache()
	t0 := a.sys.now()
	spec, err := cache.Kernel()
	if err != nil {
		return fmt.Errorf("inventory: load vmlinux BTF: %w", err)
	}
	emit.Logf(a.w, "vmlinux BTF parsed in %v", a.sys.now().Sub(t0).Round(time.Millisecond))

	t0 = a.sys.now()
	deny := inventory.DefaultDeny
	if !a.opts.IncludeKnown {
		deny = inventory.KnownDeny(deny)
	}
	mods, err := a.scaleModule(cache)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	inv, err := inventory.Take(ctx, spec, inventory.Filter{MaxArgs: a.opts.MaxArgs, Deny: deny}, inventory.DefaultPaths, mods)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	emit.Logf(a.w, "inventory in %v; rejected: %s", a.sys.now().Sub(t0).Round(time.Millisecond), formatReasons(inv.Rejected))
	return sc.run(a, ctx, cache, inv)
}

// executeStorm is the storm scenario after the inventory: the hammer, the
// selected functions loaded and attached, the crash asked for if any, the
// hold, and the detach.
func (a *agent) executeStorm(ctx context.Context, cache *btf.Cache, inv inventory.Result) error {
	funcs := selectFuncs(inv.Candidates, a.opts.N, a.opts.Seed)
	if len(a.opts.Funcs) > 0 {
		funcs = a.opts.Funcs
	}
	a.selected = len(funcs)
	_ = a.w.Emit(event.Event{Kind: event.KindInventory, Inventory: inv.Event(len(funcs))})

	var err error
	a.ham, err = hammer.Start(ctx, hammer.Config{Threads: a.opts.Threads, Stall: a.opts.Stall, Seed: a.opts.Seed, Emit: a.w, RT: a.opts.RT, TimerPeriod: a.opts.TimerPeriod, FairShare: fairShare(a.opts.RTReserve)})
	if err != nil {
		return fmt.Errorf("hammer: %w", err)
	}

	if err := attach.PrepareLimits(len(funcs)); err != nil {
		emit.Logf(a.w, "limits: %v", err)
	}
	at, err := attach.New(attach.Config{Cache: cache, Emit: a.w, FExitEvery: a.opts.FExitEvery})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	if _, err := at.Load(ctx, a.set, funcs); err != nil {
		return fmt.Errorf("load phase: %w", err)
	}
	ph, err := at.Attach(ctx, a.set)
	a.attached = ph.Succeeded
	if err != nil {
		return fmt.Errorf("attach phase: %w", err)
	}

	if a.opts.Crash == options.CrashSysrqC {
		emit.Logf(a.w, "crash=sysrq-c: %d trampolines attached, crashing the kernel now", a.attached)
		a.sys.sync()
		a.sys.sleep(flushDelay)
		if err := a.sys.sysrqCrash(); err != nil {
			return fmt.Errorf("crash=sysrq-c: write 'c' to %s: %w", sysrqPath, err)
		}
		return fmt.Errorf("crash=sysrq-c: the kernel survived writing 'c' to %s", sysrqPath)
	}
	if a.opts.Crash == options.CrashRTInversion {
		stop, err := injectRTInversion(0)
		if err != nil {
			return fmt.Errorf("crash=rt-inversion: %w", err)
		}
		defer stop()
		emit.Logf(a.w, "crash=rt-inversion: %d trampolines attached; two agent processes spin at SCHED_FIFO 1 and 2 on cpu 0, the first off the CPU; waiting for an RCU-tasks grace period", a.attached)
		if err := waitTasksRCU(); err != nil {
			return fmt.Errorf("crash=rt-inversion: wait for RCU-tasks: %w", err)
		}
		// The injection did not do what it was asked: no judgement of
		// the kernel, which ended a grace period it had no reason to hold.
		return emit.Unjudged(errors.New("crash=rt-inversion: the RCU-tasks grace period ended despite the starved spinner"))
	}
	if strings.HasPrefix(a.opts.Crash, options.CrashLKDTMPrefix) || strings.HasPrefix(a.opts.Crash, options.CrashBugPrefix) {
		emit.Logf(a.w, "crash=%s: %d trampolines attached; asking the kernel for the report", a.opts.Crash, a.attached)
		if err := a.sys.provoke(a.opts.Crash); err != nil {
			// Still blocked is what a fatal report does to its writer:
			// the host ends the cell on the report, not on this.
			if !errors.Is(err, errLeftWriting) {
				return fmt.Errorf("crash=%s: %w", a.opts.Crash, err)
			}
			emit.Logf(a.w, "crash=%s: %v", a.opts.Crash, err)
		}
	}
	if a.opts.Crash == options.CrashHungTask {
		if err := a.sys.hangTask(); err != nil {
			return fmt.Errorf("crash=hung-task: %w", err)
		}
		emit.Logf(a.w, "crash=hung-task: %d trampolines attached; one agent thread now sleeps in D state, with the hung task timeout at %d s", a.attached, options.HungTaskTimeout)
	}

	if err := hold(ctx, a.opts.Hold); err != nil {
		return fmt.Errorf("hold: %w", err)
	}

	if _, err := at.Detach(ctx, a.set, a.opts.Detach); err != nil {
		return fmt.Errorf("detach phase: %w", err)
	}
	a.detachedN = a.opts.Detach != options.All

	a.stopHammer()
	return nil
}

// hold keeps everything attached for d with the hammer running.
func hold(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *agent) stopHammer() {
	if a.ham == nil || a.hamDone {
		return
	}
	a.hamDone = true
	l := a.ham.Stop()
	if rt, refused := a.ham.RT(); rt+refused > 0 {
		f := event.Feature{Name: "rt_threads", Supported: rt > 0, Msg: fmt.Sprintf("%d hammer threads ran SCHED_FIFO/RR, %d refused", rt, refused)}
		_ = a.w.Emit(event.Event{Kind: event.KindFeature, Feature: &f})
	}
	_ = a.w.Emit(event.Event{Kind: event.KindLiveness, Liveness: &l})
}

// finish stops what still runs, emits Done, powers off if asked, and
// releases the links. Links left on purpose by detach=<count> stay attached
// through the reboot; on any other path they are closed first.
func (a *agent) finish(runErr error) error {
	a.stopHammer()
	var stalls map[int64]time.Duration
	if a.ham != nil {
		stalls = a.ham.Stalls()
	}
	done := a.verdict(runErr, stalls)
	_ = a.w.Emit(event.Event{Kind: event.KindDone, Done: &done})
	err := runErr
	if err == nil && !done.OK {
		err = errors.New(done.Reason)
	}

	keep := runErr == nil && a.detachedN
	if !keep {
		if cerr := a.set.Close(); cerr != nil {
			fmt.Fprintf(a.sys.stderr, "agent: %v\n", cerr)
		}
	}
	if werr := a.w.Err(); werr != nil {
		fmt.Fprintf(a.sys.stderr, "agent: the host may have missed events: %v\n", werr)
	}
	if a.opts.Poweroff {
		a.sys.sync()
		a.sys.sleep(flushDelay)
		if rerr := a.sys.reboot(); rerr != nil {
			fmt.Fprintf(a.sys.stderr, "agent: reboot: %v\n", rerr)
		}
	}
	if cerr := a.set.Close(); cerr != nil {
		fmt.Fprintf(a.sys.stderr, "agent: %v\n", cerr)
	}
	return err
}

// verdict is the agent's own view of the run. Attach failures alone do not
// make it fail: they are data for the host.
// stalls are the hammer threads ever seen stalled, by TID.
func (a *agent) verdict(runErr error, stalls map[int64]time.Duration) event.Done {
	if runErr != nil {
		var u *emit.UnjudgedError
		return event.Done{Reason: runErr.Error(), Unjudged: errors.As(runErr, &u)}
	}
	var reasons []string
	if a.selected > 0 && a.attached == 0 {
		reasons = append(reasons, fmt.Sprintf("no trampoline attached (0 of %d selected)", a.selected))
	}
	if len(stalls) > 0 {
		tids := slices.Sorted(maps.Keys(stalls))
		parts := make([]string, len(tids))
		for i, tid := range tids {
			parts[i] = fmt.Sprintf("tid %d for %v", tid, stalls[tid].Round(time.Millisecond))
		}
		reasons = append(reasons, fmt.Sprintf("%d hammer thread(s) stalled beyond %v: %s", len(stalls), a.opts.Stall, strings.Join(parts, ", ")))
	}
	reasons = append(reasons, a.churn.Reasons()...)
	if n := a.race[event.InjFreedUnderTask]; n > 0 {
		reasons = append(reasons, fmt.Sprintf("%d injection(s): the kernel freed a trampoline image while a task was preempted inside it", n))
	}
	if n := a.race[event.InjWrongState]; n > 0 {
		reasons = append(reasons, fmt.Sprintf("%d injection(s): a patch left the callsite in a state it must never be in (an INT3 patch's end not what the tracer asked for, or calls through it failing; a CALL_OPS branch live over the nop ops)", n))
	}
	if len(reasons) > 0 {
		return event.Done{Reason: strings.Join(reasons, "; ")}
	}
	return event.Done{OK: true}
}

// selectFuncs picks n of candidates (options.All for every one) in an order
// fixed by seed. candidates must be sorted, so that seed and kernel determine
// the selection.
func selectFuncs(candidates []string, n int, seed int64) []string {
	out := slices.Clone(candidates)
	// The second PCG word only separates this stream from the hammer's,
	// which uses the same seed.
	rng := rand.New(rand.NewPCG(uint64(seed), 0x66746873656c6563))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if n != options.All && n < len(out) {
		out = out[:n]
	}
	return out
}

func formatReasons(m map[inventory.Reason]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// watchStdin returns a context that ends when stdin reaches EOF or fails:
// on a board the agent's stdin is a pipe the harness holds open and never
// writes, so EOF means the SSH session that started the agent is gone, and
// the stress must stop (and release its links) rather than outlive it.

// fairShare turns the rtreserve option into the hammer's FairShare: 0
// leaves the kernel's setting (negative there).
func fairShare(percent int) float64 {
	if percent == 0 {
		return -1
	}
	return float64(percent) / 100
}
