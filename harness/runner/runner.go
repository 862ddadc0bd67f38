// Package runner takes one cell from fragments to verdict: kernel build, image
// build, accelerator choice, boot, and the result files. Builds are serialised
// across cells (two kernel builds on two cores only slow each other down);
// boots may overlap.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/cell"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/progress"
	"github.com/ftrace-harness/fth/images"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// Env is what every cell of a run shares.
type Env struct {
	KernelSrc  string
	KconfigDir string
	// ModuleDir is the ftrace-harness checkout (for building the agent).
	ModuleDir string
	CacheDir  string
	Jobs      int
	// ToolRoot is the toolchain root's directory (scripts/toolroot.sh
	// path), for cells whose toolchain or QEMU runs in it.
	ToolRoot string
	Log      *slog.Logger
	// Progress shows builds and the agent's phases as they go (a bar on a
	// terminal, plain lines in CI); nil logs a line every 5 s.
	Progress *progress.Reporter

	buildMu sync.Mutex
}

// Cell says what one cell runs.
type Cell struct {
	Name      string
	Arch      arch.Arch
	Fragments []string
	// Preempt is the preempt= boot parameter; "" leaves the build's default.
	Preempt string
	// KernelArgs are extra kernel parameters, after the harness's own
	// (fth run --kernel-arg).
	KernelArgs []string
	// Agent are the agent's options: its scenario and everything else,
	// given as text and read as fields (options.NewArgs).
	Agent      options.Args
	Accel      qemu.Accel
	CPUs       int
	MemoryMB   int
	Deadline   time.Duration
	Silence    time.Duration
	PauseAfter time.Duration
	// SkipUnconfigurable turns "the tree or toolchain cannot give these
	// symbols" (found before anything is built) into a skip with that reason
	// instead of an error: right for a matrix, where some cells cannot exist
	// on some machines; wrong for one cell a developer asked for by name.
	SkipUnconfigurable bool
	// Widen holds the race-widening emulator settings.
	Widen qemu.Widening
	// Patches change the kernel source for this cell only (fth mutate,
	// fth run --patch).
	Patches []kbuild.Patch
	// StopAtFinding ends the cell shortly after the first kernel report.
	StopAtFinding bool
	// Toolchain builds the kernel and its modules; "" is host.
	Toolchain kbuild.Compiler
	// QEMU boots the cell; "" is the host's.
	QEMU qemu.Emulator
	// KernelSrc is this cell's kernel tree when it is not the run's
	// (Env.KernelSrc): the kernel-version axis of fth matrix.
	KernelSrc string
}

// src is the kernel tree c is built from.
func (e *Env) src(c Cell) string {
	if c.KernelSrc != "" {
		return c.KernelSrc
	}
	return e.KernelSrc
}

// ErrInfra marks errors that are the harness's or the machine's, not the
// kernel's.
var ErrInfra = errors.New("infrastructure error")

// BuildKernel builds (or fetches) the kernel for arch and fragments with
// the --toolchain choice c, resolved once here, and the modules its guest
// gets (see modules, built with the same toolchain), from one opened
// source tree.
func (e *Env) BuildKernel(ctx context.Context, a arch.Arch, c kbuild.Compiler, frags []string, patches ...kbuild.Patch) (kbuild.Kernel, map[string]string, error) {
	tc, err := kbuild.ResolveToolchain(ctx, a, c, e.ToolRoot)
	if err != nil {
		return kbuild.Kernel{}, nil, err
	}
	return e.buildKernelFrom(ctx, e.KernelSrc, a, tc, frags, nil, patches...)
}

// buildKernelFrom is BuildKernel from the tree at src, with tc resolved,
// and the extra module sources besides projectModules.
func (e *Env) buildKernelFrom(ctx context.Context, src string, a arch.Arch, tc kbuild.Toolchain, frags, extraMods []string, patches ...kbuild.Patch) (kbuild.Kernel, map[string]string, error) {
	e.buildMu.Lock()
	defer e.buildMu.Unlock()
	req, err := e.request(ctx, src, a, frags)
	if err != nil {
		return kbuild.Kernel{}, nil, err
	}
	req.Toolchain = tc
	req.Patches = patches
	k, err := kbuild.Build(ctx, e.Log, req)
	if err != nil {
		return kbuild.Kernel{}, nil, err
	}
	mods, err := e.modules(ctx, req, k, extraMods...)
	if err != nil {
		return kbuild.Kernel{}, nil, err
	}
	return k, mods, nil
}

func (e *Env) request(ctx context.Context, dir string, a arch.Arch, frags []string) (kbuild.Request, error) {
	src, err := kbuild.PrepareSource(ctx, e.Log, dir, e.CacheDir)
	if err != nil {
		return kbuild.Request{}, fmt.Errorf("kernel source: %w", err)
	}
	if src.Origin != "" {
		e.Log.Info("kernel source", "dir", src.Origin, "version", src.Version, "snapshot", src.Dir)
	} else {
		e.Log.Info("kernel source", "dir", src.Dir, "version", src.Version)
	}
	return kbuild.Request{
		Arch: a, Source: src, KconfigDir: e.KconfigDir, Fragments: frags, CacheDir: e.CacheDir, Jobs: e.Jobs,
		Progress: func(p kbuild.Progress) {
			if e.Progress != nil {
				total := p.Total
				if total > 0 && p.Steps >= total {
					// Past the previous build's count: other fragments
					// compile more files; say "almost", not 100%.
					total = p.Steps + 1
				}
				e.Progress.Update(string(a.Name)+" kernel build ("+p.Target+")", p.Steps, total, p.Current)
				return
			}
			e.Log.Info("building", "arch", a.Name, "steps", p.Steps, "elapsed", p.Elapsed.Round(time.Second), "at", p.Current)
		},
	}, nil
}

// GuestModuleDir is where the initramfs holds the modules the agent loads.
const GuestModuleDir = known.GuestModuleDir

// projectModules are the project's own module source directories, one
// module each: fth_target (the trace targets and injected bugs),
// fth_deliver (the delivery oracle's callers and counting users) and
// fth_klp (its livepatch user, which needs a module of its own).
func projectModules() []string {
	return []string{"stress/kmod-target", "stress/kmod-deliver", "stress/kmod-klp"}
}

// scaleModule is fth_scale's source (options.ScaleModuleName): 32,768
// functions take half a minute to compile, so only cells that ask for it
// (the scalemod option) get it.
const scaleModule = "stress/kmod-scale"

// modules builds the project's test modules against k and returns every
// module the guest gets, as guest path → host path: k's in-tree modules
// (the ftrace samples), fth_target and the others, and the user programs
// a module's Makefile builds with it. A kernel without modules gets none.
func (e *Env) modules(ctx context.Context, req kbuild.Request, k kbuild.Kernel, extra ...string) (map[string]string, error) {
	if k.Modules == nil {
		return nil, nil
	}
	files := map[string]string{}
	for _, src := range append(projectModules(), extra...) {
		ext, err := kbuild.BuildModule(ctx, e.Log, req, k, filepath.Join(e.ModuleDir, src))
		if err != nil {
			return nil, err
		}
		// A reproducer's program goes beside its module, as its
		// Makefile leaves it.
		for _, p := range append(ext.Programs, ext.Module) {
			if p != "" {
				files[GuestModuleDir+"/"+filepath.Base(p)] = p
			}
		}
	}
	for name, p := range k.Modules {
		files[GuestModuleDir+"/"+name+".ko"] = p
	}
	return files, nil
}

// BuildImage builds (or fetches) the initramfs for a.
func (e *Env) BuildImage(ctx context.Context, a arch.Arch) (images.Image, error) {
	e.buildMu.Lock()
	defer e.buildMu.Unlock()
	return images.Build(ctx, e.Log, images.Request{GOARCH: a.GOARCH, ModuleDir: e.ModuleDir, CacheDir: e.CacheDir})
}

// Run runs c into runDir/<c.Name> and returns its final result. The error is
// non-nil only when no verdict could be reached; the result is written either way.
func (e *Env) Run(ctx context.Context, runID, runDir string, c Cell) (results.Result, error) {
	log := e.Log.With("cell", c.Name)
	// The agent's options as the agent will read them, read as fields.
	agent := c.Agent.Options()
	w, err := results.NewCellWriter(filepath.Join(runDir, c.Name), results.Result{
		RunID: runID, Cell: c.Name, Arch: string(c.Arch.Name), Scenario: agent.Scenario, StartedAt: time.Now().UTC(),
		Request: e.cellRequest(c), Widening: c.Widen.String(),
	})
	if err != nil {
		return results.Result{}, err
	}
	log.Info("cell", "dir", w.Dir)
	start := time.Now()
	fail := func(step string, err error) (results.Result, error) {
		_ = w.Update(func(r *results.Result) {
			r.Verdict, r.Reason = results.Error, step+": "+err.Error()
			if ctx.Err() != nil {
				r.Reason = "interrupted during " + step
			}
			r.Timings.TotalSeconds = time.Since(start).Seconds()
			r.EndedAt = time.Now().UTC()
		})
		return w.Result(), fmt.Errorf("%s: %s: %w", c.Name, step, err)
	}

	// Every cell says which QEMU ran it; the version also picks the
	// spelling of singlestep, and a --qemu named by version must be it:
	// asked before the kernel is built, so that a wrong one costs nothing.
	vm := qemu.Config{Arch: c.Arch, Emulator: c.QEMU, Root: e.ToolRoot}
	qv, qline, err := vm.ProbeVersion(ctx)
	if err != nil {
		return fail("qemu", err)
	}
	log.Info("qemu", "qemu", orHost(c.QEMU), "version", qline)
	_ = w.Update(func(r *results.Result) { r.QEMU = qline })

	// The toolchain, once for the cell: the kernel, its modules and the
	// result below all use this answer. A missing compiler or root is
	// the kernel build's error, as it always was, and costs no build.
	tc, err := kbuild.ResolveToolchain(ctx, c.Arch, c.Toolchain, e.ToolRoot)
	if err != nil {
		return fail("kernel build", err)
	}
	var extraMods []string
	if agent.ScaleModule {
		extraMods = append(extraMods, scaleModule)
	}
	reproducer := ""
	if agent.Scenario == event.ScenarioStandalone {
		// The reproducer's modules are built as the project's are; its
		// run.sh goes into the image's overlay with them, below.
		reproducer = agent.Reproducer
		if kbuild.HasModuleSource(filepath.Join(e.ModuleDir, known.ReproDir, reproducer)) {
			extraMods = append(extraMods, filepath.Join(known.ReproDir, reproducer))
		}
	}
	k, mods, err := e.buildKernelFrom(ctx, e.src(c), c.Arch, tc, c.Fragments, extraMods, c.Patches...)
	if err == nil && reproducer != "" {
		if mods == nil {
			mods = map[string]string{}
		}
		mods[path.Join(known.GuestReproDir, reproducer, "run.sh")] = filepath.Join(e.ModuleDir, known.ReproDir, reproducer, "run.sh")
	}
	// A matrix cell the tree and toolchain cannot give is a skip with the
	// reason: Kconfig's verdict, or a kernel whose BTF it would refuse.
	why := ""
	switch {
	case errors.Is(err, kbuild.ErrConfigMismatch):
		why = "cannot be configured with this tree and toolchain"
	case errors.Is(err, kbuild.ErrUnusableBTF):
		why = "this tree and toolchain give a kernel that refuses its own BTF"
	}
	if c.SkipUnconfigurable && why != "" {
		log.Warn("cell skipped: "+why, "err", err)
		_ = w.Update(func(r *results.Result) {
			r.Verdict, r.Reason = results.Skip, fmt.Sprintf("%s (%s): %v", why, tc.Compiler, err)
			r.Timings.TotalSeconds = time.Since(start).Seconds()
			r.EndedAt = time.Now().UTC()
		})
		return w.Result(), nil
	}
	// The note is about the host's compilers.
	if err != nil && errors.Is(err, kbuild.ErrConfigMismatch) && c.Arch.ToolchainNote != "" && !tc.InRoot() {
		err = fmt.Errorf("%w\n%s: %s", err, c.Arch.Name, c.Arch.ToolchainNote)
	}
	if err != nil {
		return fail("kernel build", err)
	}
	kernelDone := time.Now()
	img, err := e.BuildImage(ctx, c.Arch)
	if err != nil {
		return fail("initramfs", err)
	}
	if img, err = images.Overlay(e.Log, img, mods, e.CacheDir); err != nil {
		return fail("initramfs", err)
	}
	_ = w.Update(func(r *results.Result) {
		r.Kernel = results.Kernel{
			Release: k.Release, SourceVersion: k.SourceVersion, SourceDir: k.SourceDir, ConfigSHA256: k.ConfigSHA256,
			Image: k.Image, Vmlinux: k.Vmlinux, Toolchain: k.Toolchain, Compiler: string(tc.Compiler), Fragments: k.Fragments, NotAsked: k.NotAsked, Verified: k.Verified, Observed: k.Observed, Cached: k.Cached,
			Patches: k.Patches,
		}
		r.Timings.KernelSeconds = kernelDone.Sub(start).Seconds()
		r.Timings.ImageSeconds = time.Since(kernelDone).Seconds()
	})

	accel, why, err := qemu.ResolveAccel(ctx, log, c.Accel, c.Arch, k.Image, e.CacheDir, qv)
	if err != nil {
		return fail("accelerator", err)
	}
	if caveat := qemu.AccelCaveat(c.Arch, accel, qv); caveat != "" {
		// Still run it, as asked, but no verdict of it goes unmarked.
		log.Warn("accelerator", "accel", accel, "qemu", qline, "caveat", caveat)
		why += "; " + caveat
	}
	log.Info("accelerator", "accel", accel, "why", why)
	if err := c.Widen.Check(accel); err != nil {
		return fail("accelerator", err)
	}
	_ = w.Update(func(r *results.Result) { r.AccelReason = why })
	sockDir, err := os.MkdirTemp("", "fth-vm-")
	if err != nil {
		return fail("boot", err)
	}
	defer os.RemoveAll(sockDir)
	var cmdline []string
	if c.Preempt != "" {
		cmdline = append(cmdline, "preempt="+c.Preempt)
	}
	if agent.Scenario == event.ScenarioRace && c.Arch.Has(arch.CallOps) {
		// The CALL_OPS window (racetarget=callops) frees an ftrace_ops
		// under the held task on a kernel that does not wait for it:
		// zeroed on free, the task's call through it faults rather than
		// run on through stale memory unseen.
		cmdline = append(cmdline, "init_on_free=1")
	}
	cmdline = append(cmdline, agent.KernelArgs()...)
	cmdline = append(cmdline, c.KernelArgs...)
	if agent.Scenario == event.ScenarioCampaign && c.Arch.NoRace != "" {
		log.Warn("campaign: no race stage on this arch", "arch", c.Arch.Name, "why", c.Arch.NoRace)
	}
	spec := cell.Spec{
		VM: qemu.Config{
			Arch: c.Arch, Kernel: k.Image, Initrd: img.Path, Cmdline: cmdline,
			CPUs: c.CPUs, MemoryMB: c.MemoryMB, Accel: accel, SocketDir: sockDir,
			Widen: c.Widen, QEMUVersion: qv, Emulator: c.QEMU, Root: e.ToolRoot,
			// The race scenario stops vCPUs at exact instructions through
			// the gdbstub, on the agent's request (harness/race).
			// The campaign's race stage is skipped, with the reason, on
			// an arch that cannot inject (Arch.NoRace).
			Race: agent.RacePort(c.Arch.NoRace == ""),
		},
		Agent:      c.Agent,
		Deadline:   c.Deadline,
		Silence:    c.Silence,
		PauseAfter: c.PauseAfter,
		Progress:   e.Progress,
		// A campaign is judged by its first finding, as fth mutate's
		// cells are: what follows an oops is the oops's aftermath. So
		// is a standalone reproducer, whose job ends at its report.
		StopAtFinding: c.StopAtFinding || agent.Scenario == event.ScenarioCampaign || agent.Scenario == event.ScenarioStandalone,
	}
	if err := cell.Run(ctx, log, w, spec); err != nil {
		return fail("boot", fmt.Errorf("%w: %w", ErrInfra, err))
	}
	_ = w.Update(func(r *results.Result) {
		r.Timings.TotalSeconds = time.Since(start).Seconds()
		r.EndedAt = time.Now().UTC()
	})
	res := w.Result()
	if asked := res.PreemptRefused(); asked != "" {
		log.Warn("the kernel runs another preemption model than the one asked for: its PREEMPT_DYNAMIC does not offer it", "asked", asked, "runs", res.PreemptModel)
	}
	return res, nil
}

// cellRequest records what c asks for, for `fth repro`.
func (e *Env) cellRequest(c Cell) *results.Request {
	return &results.Request{
		Arch: string(c.Arch.Name), Fragments: c.Fragments, Preempt: c.Preempt, Scenario: c.Agent.Options().Scenario,
		AgentArgs: c.Agent.Given(), Accel: string(c.Accel), CPUs: c.CPUs, MemoryMB: c.MemoryMB,
		Deadline: c.Deadline.Seconds(), Silence: c.Silence.Seconds(),
		Singlestep: c.Widen.Singlestep, Icount: c.Widen.Icount, KernelSrc: e.src(c),
		Patches:   requestPatches(c.Patches),
		Toolchain: string(orHost(c.Toolchain)), QEMU: string(orHost(c.QEMU)),
		KernelArgs: c.KernelArgs,
	}
}

// orHost spells an unset choice "host", as the flags do.
func orHost[T ~string](v T) T {
	if v == "" {
		return "host"
	}
	return v
}

func requestPatches(ps []kbuild.Patch) []results.RequestPatch {
	var out []results.RequestPatch
	for _, p := range ps {
		out = append(out, results.RequestPatch{Name: p.Name, Text: string(p.Text)})
	}
	return out
}

// AxesSuffix is what a cell's name gets for a toolchain and a QEMU other
// than the host's ("-gcc-14", "-qemu-11.1"): "" for the defaults, so
// default cells keep their names.
func AxesSuffix(tc kbuild.Compiler, q qemu.Emulator) string {
	s := ""
	if !tc.IsHost() {
		s += "-" + string(tc)
	}
	if !q.IsHost() {
		s += "-qemu-" + string(q)
	}
	return s
}

// VariantName names a cell by the fragments beyond base and arch, plus the
// boot-time preemption model when it differs from the preempt fragment's.
func VariantName(frags []string, preempt string) string {
	var parts []string
	for _, f := range frags {
		if f == "base" || strings.HasPrefix(f, "arch/") {
			continue
		}
		if f == "preempt/"+preempt {
			preempt = ""
		}
		parts = append(parts, filepath.Base(f))
	}
	if preempt != "" {
		parts = append(parts, "boot-"+preempt)
	}
	if len(parts) == 0 {
		return "base"
	}
	return strings.Join(parts, "-")
}
