package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"slices"

	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p, err := parseRun(args, stdout)
	if err != nil || p == nil {
		return err
	}
	if p.dryRun {
		printDryRun(stdout, p.cell, p.b.kernelSrc)
		return nil
	}
	log := newLogger(stderr, p.b.verbose)
	return runOne(ctx, log, p.b.env(log, p.repo), p.out, p.runID, p.cell, stdout)
}

// runPlan is what fth run's flags ask for: one cell, checked.
type runPlan struct {
	b          buildFlags
	repo       string
	cell       runner.Cell
	out, runID string
	dryRun     bool
}

// parseRun checks fth run's flags and turns them into a cell, before
// anything is built; fth bisect takes its test from the same flags. A nil
// plan with no error means there is nothing to run (--agent-arg help).
func parseRun(args []string, stdout io.Writer) (*runPlan, error) {
	fs := newFlagSet("run")
	var b buildFlags
	b.register(fs, withAll)
	def := matrix.DefaultParams()
	var (
		out        = fs.String("out", "out/runs", "directory for run results")
		runID      = fs.String("run-id", "", "run id (default: time stamp plus random suffix)")
		accelFlag  = fs.String("accel", string(def.Accel), "QEMU accelerator: auto (KVM if a probe boot works, else tcg-single, or tcg-multi on QEMU 11.1 and later), kvm, tcg-single, tcg-multi")
		cpus       = fs.Int("cpus", def.CPUs, "guest vCPUs")
		mem        = fs.Int("mem", def.MemoryMB, "guest memory in MiB")
		preempt    = fs.String("preempt", "full", "preempt= boot parameter (PREEMPT_DYNAMIC); empty to leave the build default")
		n          = fs.String("n", def.Agent["n"], "trampolines to attach, or 'all'")
		hold       = fs.Duration("hold", 5*time.Second, "how long to keep every trampoline attached with the hammer running")
		detach     = fs.String("detach", def.Agent["detach"], "how many trampolines to detach one by one with timing ('all', or a number; the rest go with the guest)")
		seed       = fs.Int64("seed", 0, "random seed for function selection and the hammer (0: the agent picks and reports one)")
		crash      = fs.String("crash", "", "inject a fault after attaching: sysrq-c (a panic), hung-task (one agent thread left in D state), rt-inversion (one agent thread starved behind another at SCHED_FIFO: a harness-induced stall), lkdtm:<TYPE> or bug:<name> (one kernel report from LKDTM or fth_target.ko's injected bugs, with kconfigs/debug/triage)")
		pauseAfter = fs.Duration("pause-after", 0, "stop the VM over QMP this long after the agent starts (hang injection)")
		deadline   = fs.Duration("deadline", def.Deadline, "overall deadline for the boot (scaled per arch; a churn longer than it gets its duration plus 15m)")
		silence    = fs.Duration("silence", def.Silence, "no-output watchdog (scaled per arch)")
		singlestep = fs.Bool("singlestep", false, "race widening: one guest instruction per TCG block (QEMU -singlestep / one-insn-per-tb)")
		icount     = fs.String("icount", "", "race widening: QEMU -icount value, e.g. shift=auto (needs tcg-single)")
		inclKnown  = fs.Bool("include-known", false, "attach to and cycle the known findings' triggers (results/known) and count them as failures: for reproducing them")
		dryRun     = fs.Bool("dry-run", false, "check every input and print the cell that would run, then stop: nothing is built or booted")
		qemuFlag   = fs.String("qemu", string(qemu.EmulatorDefault), "QEMU that boots the cell: "+emulatorList()+" (default: the arch's measured best: 11.1 on riscv64, the host's elsewhere; host: the machine's, Debian 12's 7.2; 11.1 runs in the toolchain root, see make deps)")
		agentArgs  multiFlag
		patchFiles multiFlag
		kernelArgs multiFlag
	)
	fs.Var(&kernelArgs, "kernel-arg", "an extra kernel `parameter`, after the harness's own, e.g. ftrace=nop (which also turns the ftrace startup self-tests off) (repeatable; recorded for fth repro)")
	fs.Var(&patchFiles, "patch", "a source `patch` (patch -p1; text before the first --- line is ignored) to build the kernel with, e.g. tests/seeds/*.patch (repeatable; the tree is never written)")
	fs.Var(&agentArgs, "agent-arg", "extra agent option key=value (repeatable; 'fth run --agent-arg help' lists them)")
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth run [flags]",
		About: "Builds the kernel (or takes it from the cache), boots it under QEMU with the\nagent, runs one scenario (by default the campaign: storm, churn, race and detach in\none boot; --agent-arg scenario=storm|churn|race|bench for one alone) and records a verdict in out/runs/<run-id>/<cell>/.\nEvery input is checked before anything is built.",
	}); err != nil {
		return nil, err
	}
	if slices.Contains(agentArgs, "help") {
		printAgentOptions(stdout)
		return nil, nil
	}
	if err := checkBoot(*cpus, *mem, *deadline, *silence, *preempt); err != nil {
		return nil, err
	}
	if err := checkPositive("pause-after", *pauseAfter, true); err != nil {
		return nil, err
	}
	accel, err := qemu.ParseAccel(*accelFlag)
	if err != nil {
		return nil, fmt.Errorf("%w: --accel: %v", errUsage, err)
	}
	emu, err := qemu.ParseEmulator(*qemuFlag)
	if err != nil {
		return nil, fmt.Errorf("%w: --qemu: %v", errUsage, err)
	}
	agent := map[string]string{"n": *n, "hold": hold.String(), "detach": *detach}
	if *seed != 0 {
		agent["seed"] = fmt.Sprint(*seed)
	}
	if *crash != "" {
		agent["crash"] = *crash
	}
	if *inclKnown {
		agent["includeknown"] = "true"
	}
	if err := agentArgs.into(agent); err != nil {
		return nil, err
	}
	if _, ok := agent["scenario"]; !ok {
		// The rules that tie options to a scenario (multihold under the
		// campaign) are checked against the one that runs. A parse error
		// here is checkAgentArgs's to report.
		given, _ := options.FromArgs(agent, options.HostEnv)
		agent["scenario"] = string(defaultScenario(given))
	}
	agentOpts, err := checkAgentArgs(agent, agentFlags())
	if err != nil {
		return nil, err
	}
	opts := agentOpts.Options()
	if !flagSet(fs, "deadline") {
		*deadline = deadlineFor(opts, *deadline)
	}
	a, repo, frags, err := b.resolve()
	if err != nil {
		return nil, err
	}
	emu = emu.Resolve(a)
	if opts.Scenario == event.ScenarioRace && a.NoRace != "" {
		return nil, fmt.Errorf("%w: --agent-arg scenario=race on %s: %s", errUsage, a.Name, a.NoRace)
	}
	if err := checkRaceTarget(opts, a); err != nil {
		return nil, err
	}
	if err := checkReproducer(opts, repo); err != nil {
		return nil, err
	}
	if err := options.CheckCrashArch(opts.Crash, string(a.Name)); err != nil {
		return nil, fmt.Errorf("%w: --crash: %v", errUsage, err)
	}
	if err := b.needRoot(emu.InRoot(), "--qemu "+string(emu)); err != nil {
		return nil, err
	}
	if *runID == "" {
		*runID = newRunID()
	}
	widen := qemu.Widening{Singlestep: *singlestep, Icount: *icount}
	if accel != qemu.AccelAuto {
		if err := widen.Check(accel); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	name := fmt.Sprintf("%s-%s", a.Name, runner.VariantName(frags, *preempt))
	if w := widen.String(); w != "" {
		name += "-" + w
	}
	name += runner.AxesSuffix(b.toolchain, emu)
	if err := checkKernelArgs(kernelArgs); err != nil {
		return nil, err
	}
	patches, err := readPatches(patchFiles)
	if err != nil {
		return nil, err
	}
	c := runner.Cell{
		Name: name, Arch: a, Fragments: frags, Patches: patches,
		Preempt: *preempt, Agent: agentOpts, Accel: accel, CPUs: *cpus, MemoryMB: *mem,
		Deadline: *deadline, Silence: *silence, PauseAfter: *pauseAfter, Widen: widen,
		Toolchain: b.toolchain, QEMU: emu,
		KernelArgs: kernelArgs,
	}
	return &runPlan{b: b, repo: repo, cell: c, out: *out, runID: *runID, dryRun: *dryRun}, nil
}

// readPatches reads --patch files and checks that each is a diff that
// changes files, before anything is built.
func readPatches(paths []string) ([]kbuild.Patch, error) {
	var out []kbuild.Patch
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: --patch: %v", errUsage, err)
		}
		if _, err := kbuild.PatchedFiles(text); err != nil {
			return nil, fmt.Errorf("%w: --patch %s: %v", errUsage, p, err)
		}
		out = append(out, kbuild.Patch{Name: strings.TrimSuffix(filepath.Base(p), ".patch"), Text: text})
	}
	return out, nil
}

// churnMargin is what a churn's cell needs beyond the churn itself: boot,
// inventory, loading, the background trampolines and the teardown.
const churnMargin = 15 * time.Minute

// deadlineFor is the default deadline for agent: a churn, or a campaign
// whose budget (its churn and race together), is longer than the default
// deadline allows gets its duration plus churnMargin, so that
// `--agent-arg churn=30m` or `--agent-arg budget=60m` runs its time
// instead of ending at the deadline as an error.
func deadlineFor(o options.Options, def time.Duration) time.Duration {
	var d time.Duration
	switch o.Scenario {
	case event.ScenarioChurn:
		d = o.Churn
	case event.ScenarioCampaign:
		d = o.Budget
	default:
		return def
	}
	if d+churnMargin <= def {
		return def
	}
	return d + churnMargin
}

// defaultScenario is what fth run runs when no scenario is asked for: the
// campaign, which finds bugs, except for a --crash proof, which provokes
// its report from the storm's attached trampolines.
func defaultScenario(o options.Options) event.Scenario {
	if o.Crash != options.CrashNone {
		return event.ScenarioStorm
	}
	return event.ScenarioCampaign
}

// runOne runs c as a run of its own and prints its summary; the error says
// why it did not pass.
func runOne(ctx context.Context, log *slog.Logger, env *runner.Env, out, runID string, c runner.Cell, stdout io.Writer) error {
	runDir := filepath.Join(out, runID)
	r, err := env.Run(ctx, runID, runDir, c)
	if err != nil {
		return err
	}
	sum := results.Summary{RunID: runID, At: time.Now().UTC(), Cells: []results.CellSummary{results.Summarize(r, filepath.Join(runDir, c.Name))}}
	if err := results.WriteSummary(runDir, sum); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	results.PrintTable(stdout, sum)
	fmt.Fprintf(stdout, "\nresults: %s\n", filepath.Join(runDir, c.Name))
	writeRunReport(ctx, log, runDir, stdout)
	v := cellVerdict{cell: c.Name, verdict: r.Verdict, reason: r.Reason}
	if st := r.FailedStage(); st != "" && r.Verdict == results.Fail {
		v.reason += " (in the campaign's " + st + " stage)"
	}
	return verdictsErr([]cellVerdict{v})
}

func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

type multiFlag []string

// into adds each --agent-arg key=value to agent; the values become kernel
// parameters, so a space would split one into two.
func (m multiFlag) into(agent map[string]string) error {
	for _, kv := range m {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(kv, " \t") {
			return fmt.Errorf("%w: --agent-arg %q: want key=value without spaces", errUsage, kv)
		}
		agent[k] = v
	}
	return nil
}

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// printDryRun says what a run would do, for --dry-run.
func printDryRun(w io.Writer, c runner.Cell, kernelSrc string) {
	fmt.Fprintf(w, "would run cell %s: arch %s, fragments %s, preempt=%q, scenario %s, accel %s, %d vCPUs, %d MiB\n",
		c.Name, c.Arch.Name, strings.Join(c.Fragments, "+"), c.Preempt, c.Agent.Options().Scenario, c.Accel, c.CPUs, c.MemoryMB)
	q := c.QEMU
	if q.IsHost() {
		q = qemu.EmulatorHost
	}
	fmt.Fprintf(w, "  kernel tree %s; toolchain %s; qemu %s; agent %s\n", kernelSrc, c.Toolchain.For(c.Arch), q, c.Agent)
	if len(c.KernelArgs) > 0 {
		fmt.Fprintf(w, "  kernel args %s\n", strings.Join(c.KernelArgs, " "))
	}
}

// checkKernelArgs refuses what the guest's command line cannot carry as
// one parameter, and the agent's own fth.* namespace.
func checkKernelArgs(args []string) error {
	for _, a := range args {
		switch {
		case a == "" || strings.ContainsAny(a, " \t\n\""):
			return fmt.Errorf("%w: --kernel-arg %q: want one kernel parameter without spaces or quotes", errUsage, a)
		case strings.HasPrefix(a, "fth."):
			return fmt.Errorf("%w: --kernel-arg %q: fth.* parameters are the agent's: use --agent-arg %s", errUsage, a, strings.TrimPrefix(a, "fth."))
		}
	}
	return nil
}
