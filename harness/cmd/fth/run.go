package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/cell"
	"github.com/ftrace-harness/fth/harness/target/qemu"
	"github.com/ftrace-harness/fth/results"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b buildFlags
	b.register(fs)
	var (
		out        = fs.String("out", "out/runs", "directory for run results")
		runID      = fs.String("run-id", "", "run id (default: time stamp plus random suffix)")
		accelFlag  = fs.String("accel", "auto", "QEMU accelerator: auto (KVM if a probe boot works, else tcg-single), kvm, tcg-single, tcg-multi")
		cpus       = fs.Int("cpus", 2, "guest vCPUs")
		mem        = fs.Int("mem", 1024, "guest memory in MiB")
		preempt    = fs.String("preempt", "full", "preempt= boot parameter (PREEMPT_DYNAMIC); empty to leave the build default")
		n          = fs.String("n", "2000", "trampolines to attach, or 'all'")
		hold       = fs.Duration("hold", 5*time.Second, "how long to keep every trampoline attached with the hammer running")
		detach     = fs.String("detach", "all", "how many trampolines to detach one by one with timing ('all', or a number; the rest go with the guest)")
		seed       = fs.Int64("seed", 0, "random seed for function selection and the hammer (0: the agent picks and reports one)")
		crash      = fs.String("crash", "", "inject a guest crash after attaching: sysrq-c")
		pauseAfter = fs.Duration("pause-after", 0, "stop the VM over QMP this long after the agent starts (hang injection)")
		deadline   = fs.Duration("deadline", 30*time.Minute, "overall deadline for the boot (scaled per arch)")
		silence    = fs.Duration("silence", 90*time.Second, "no-output watchdog (scaled per arch)")
		agentArgs  multiFlag
	)
	fs.Var(&agentArgs, "agent-arg", "extra agent option key=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, repo, frags, err := b.resolve()
	if err != nil {
		return err
	}
	accel, err := qemu.ParseAccel(*accelFlag)
	if err != nil {
		return fmt.Errorf("%w: --accel: %v", errUsage, err)
	}
	if *crash != "" && *crash != "sysrq-c" {
		return fmt.Errorf("%w: --crash %q: the only injection is sysrq-c", errUsage, *crash)
	}
	agent := map[string]string{"n": *n, "hold": hold.String(), "detach": *detach}
	if *seed != 0 {
		agent["seed"] = fmt.Sprint(*seed)
	}
	if *crash != "" {
		agent["crash"] = *crash
	}
	for _, kv := range agentArgs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(kv, " \t") {
			return fmt.Errorf("%w: --agent-arg %q: want key=value without spaces", errUsage, kv)
		}
		agent[k] = v
	}
	log := newLogger(stderr, b.verbose)
	if *runID == "" {
		*runID = newRunID()
	}
	cellName := fmt.Sprintf("%s-%s", a.Name, variantName(frags, *preempt))
	runDir := filepath.Join(*out, *runID)
	w, err := results.NewCellWriter(filepath.Join(runDir, cellName), results.Result{
		RunID: *runID, Cell: cellName, Arch: string(a.Name), Scenario: "attach-storm", StartedAt: time.Now().UTC(),
	})
	if err != nil {
		return err
	}
	log.Info("cell", "dir", w.Dir)
	start := time.Now()
	finish := func(v results.Verdict, reason string) {
		_ = w.Update(func(r *results.Result) {
			if r.Verdict == results.Running || v == results.Error {
				r.Verdict, r.Reason = v, reason
			}
			r.Timings.TotalSeconds = time.Since(start).Seconds()
			r.EndedAt = time.Now().UTC()
		})
	}

	k, err := buildKernel(ctx, log, &b, a, frags)
	if err != nil {
		finish(results.Error, "kernel build: "+err.Error())
		return err
	}
	kernelDone := time.Now()
	img, err := buildImage(ctx, log, &b, a, repo)
	if err != nil {
		finish(results.Error, "initramfs: "+err.Error())
		return err
	}
	_ = w.Update(func(r *results.Result) {
		r.Kernel = results.Kernel{
			Release: k.Release, SourceVersion: k.SourceVersion, SourceDir: k.SourceDir, ConfigSHA256: k.ConfigSHA256,
			Image: k.Image, Vmlinux: k.Vmlinux, Toolchain: k.Toolchain, Fragments: k.Fragments, Verified: k.Verified, Cached: k.Cached,
		}
		r.Timings.KernelSeconds = kernelDone.Sub(start).Seconds()
		r.Timings.ImageSeconds = time.Since(kernelDone).Seconds()
	})

	accel, why, err := qemu.ResolveAccel(ctx, log, accel, a, k.Image, b.cache)
	if err != nil {
		finish(results.Error, err.Error())
		return err
	}
	log.Info("accelerator", "accel", accel, "why", why)
	_ = w.Update(func(r *results.Result) { r.AccelReason = why })
	sockDir, err := os.MkdirTemp("", "fth-vm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sockDir)
	var cmdline []string
	if *preempt != "" {
		cmdline = append(cmdline, "preempt="+*preempt)
	}
	spec := cell.Spec{
		VM: qemu.Config{
			Arch: a, Kernel: k.Image, Initrd: img.Path, Cmdline: cmdline,
			CPUs: *cpus, MemoryMB: *mem, Accel: accel, SocketDir: sockDir,
		},
		AgentArgs:  agent,
		Deadline:   *deadline,
		Silence:    *silence,
		PauseAfter: *pauseAfter,
	}
	if err := cell.Run(ctx, log, w, spec); err != nil {
		finish(results.Error, err.Error())
		return err
	}
	finish(results.Running, "")
	r := w.Result()
	sum := results.Summary{RunID: *runID, At: time.Now().UTC(), Cells: []results.CellSummary{results.Summarize(r, w.Dir)}}
	if err := results.WriteSummary(runDir, sum); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	results.PrintTable(stdout, sum)
	fmt.Fprintf(stdout, "\nresults: %s\n", w.Dir)
	switch r.Verdict {
	case results.Pass:
		return nil
	case results.Fail:
		return fmt.Errorf("%w: %s: %s", errCellsFailed, cellName, r.Reason)
	default:
		return fmt.Errorf("%s: %s: %s", cellName, r.Verdict, r.Reason)
	}
}

// variantName names a cell by the fragments beyond base and arch.
func variantName(frags []string, preempt string) string {
	var parts []string
	for _, f := range frags {
		if f == "base" || strings.HasPrefix(f, "arch/") {
			continue
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

func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
