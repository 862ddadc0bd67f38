package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/inject"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/wire/options"
)

// The race scenario's wiring: the agent becomes the race controller
// (executeRace, racectl), which runs stress/inject's injections.

// modeRaceCtl is `agent racectl <agent flags>`: the controller. Its
// helpers are racer.ModeRacer and racer.ModePreempt.
const modeRaceCtl = "racectl"

// executeRace becomes the race scenario's controller: with every thread
// kept off the held CPU, the agent execs itself as `agent racectl`, which
// reopens the event channel, runs the injections and finishes the run
// (Done, poweroff). Exec is the only way to an address space that has never
// run on the held CPU. On riscv64 (ASID allocator) an mm keeps every CPU it
// ever ran on in its cpumask, and a TLB flush of it is an SBI remote fence
// that spins in firmware until every such hart answers: a flush by the
// agent's own Go runtime (returning pages) froze CPU 0 while CPU 1 was held,
// the release never came, and both CPUs reported soft lockups (injection
// 14 of 50). A child process would not do: its parent's mm, the agent's,
// still carries the held CPU.
func (a *agent) executeRace(ctx context.Context) error {
	if a.sys.numCPU < 2 {
		return fmt.Errorf("race: needs at least 2 CPUs (one held, one racing), have %d: boot with --cpus 2", a.sys.numCPU)
	}
	held := a.sys.numCPU - 1
	rest := below(held)
	// Exec keeps the calling thread's affinity; every thread gets it, so
	// that whichever one calls exec passes it on.
	if err := racer.SetProcessCPUs(&rest, 0); err != nil {
		return fmt.Errorf("race: keep the agent off cpu %d: %w", held, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	argv := []string{"agent", modeRaceCtl, strconv.Itoa(held)}
	for k, v := range a.opts.Args() {
		argv = append(argv, "-"+k+"="+v)
	}
	emit.Logf(a.w, "race: the agent becomes the race controller (exec, off cpu %d)", held)
	// The event channel is close-on-exec: the controller opens it again.
	err = unix.Exec(exe, argv, append(os.Environ(), "FTH_NO_CMDLINE=1"))
	return fmt.Errorf("race: exec the controller: %w", err)
}

// raceCtlMain is `agent racectl <held-cpu> <agent flags>`: the race
// scenario's controller (executeRace), with every CPU but the held one
// (which its own affinity therefore cannot tell it). It ends the run as the
// agent would: Done, then poweroff when asked.
func raceCtlMain(ctx context.Context, args []string, sys system) error {
	held, opts, optErr, err := raceArgs(modeRaceCtl, args, sys)
	if err != nil {
		return err
	}
	ch, err := emit.Open(opts.Events, sys.virtioDir, sys.devDir, sys.stdout)
	if err != nil {
		fmt.Fprintf(sys.stderr, "agent: %v; writing events to stdout\n", err)
		ch, _ = emit.Open("-", "", "", sys.stdout)
	}
	defer ch.Close()
	a := &agent{sys: sys, opts: opts, w: emit.NewWriter(ch.W), set: attach.NewSet()}
	runErr := optErr
	if runErr == nil {
		runErr = a.controlRace(ctx, held)
	}
	return a.finish(runErr)
}

// below is the set of CPUs numbered below held: every CPU but the held
// one, which is the last.
func below(held int) unix.CPUSet {
	var set unix.CPUSet
	for c := 0; c < held; c++ {
		set.Set(c)
	}
	return set
}

// raceArgs reads `<held-cpu> <agent flags>`, the arguments of the race
// controllers (racectl, racestage), and names their threads as the
// harness's own task (cell.GuestHarness), as the agent's were. A bad held
// CPU is err; bad flags are optErr, with the options at their defaults.
func raceArgs(mode string, args []string, sys system) (held int, opts options.Options, optErr, err error) {
	if len(args) < 1 {
		return 0, opts, nil, fmt.Errorf("agent %s: want <held-cpu> <agent flags>", mode)
	}
	if held, err = strconv.Atoi(args[0]); err != nil {
		return 0, opts, nil, fmt.Errorf("agent %s: held cpu %q", mode, args[0])
	}
	racer.NameThreads(racer.GuestComm)
	opts, optErr = options.Parse(args[1:], "", options.Env{NumCPU: held + 1}, sys.stderr)
	return held, opts, optErr, nil
}

// controlRace is the controller's whole run, holding cpu held.
func (a *agent) controlRace(ctx context.Context, held int) error {
	port, err := raceport.Open(a.sys.virtioDir, a.sys.devDir)
	if errors.Is(err, raceport.ErrNoPort) {
		return fmt.Errorf("race: %w (the host must boot the VM for the race scenario: fth run --agent-arg scenario=race does)", err)
	}
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	defer port.Close()
	a.race, err = inject.Run(ctx, inject.Env{W: a.w, Opts: a.opts, InCampaign: a.inCampaign, Until: a.raceUntil}, port, held)
	return err
}
