package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/progress"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/harness/toolroot"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// defaultKernelSrc is where `make deps` unpacks Debian's linux-source-7.3.
const defaultKernelSrc = "/var/cache/fth/src/linux-source-7.3"

// modulePath identifies the ftrace-harness module when looking for its root.
const modulePath = "github.com/ftrace-harness/fth"

// buildFlags are shared by build, image and run.
type buildFlags struct {
	arch      string
	kernelSrc string
	// kernel is --kernel: a Debian kernel series, resolved by resolve
	// into kernelSrc.
	kernel    string
	repo      string
	kconfigs  string
	fragments string
	cache     string
	jobs      int
	verbose   bool
	// toolchainFlag is --toolchain; resolve parses it into toolchain.
	toolchainFlag string
	toolchain     kbuild.Compiler
	// toolRoot is the toolchain root's directory, set by needRoot when a
	// choice runs in it.
	toolRoot string
}

// Which build flags a command honours, beyond --repo, --cache and -v, which
// every command that builds or deploys does.
type buildFlagSet int

const (
	// withArch: --arch.
	withArch buildFlagSet = 1 << iota
	// withFragments: --fragments.
	withFragments
	// withKernel: --kernel-src, --kconfigs and -j, for commands that build
	// kernels.
	withKernel
	// withToolchain: --toolchain, one toolchain for every kernel the
	// command builds (fth matrix takes a list of its own).
	withToolchain
	withAll = withArch | withFragments | withKernel | withToolchain
)

func (b *buildFlags) register(fs *flag.FlagSet, which buildFlagSet) {
	b.arch = "x86_64"
	b.kernelSrc = envOr("KERNEL_SRC", defaultKernelSrc)
	if which&withArch != 0 {
		fs.StringVar(&b.arch, "arch", b.arch, "target architecture: "+archList())
	}
	if which&withKernel != 0 {
		fs.StringVar(&b.kernelSrc, "kernel-src", b.kernelSrc, "kernel source tree (env KERNEL_SRC)")
		fs.StringVar(&b.kernel, "kernel", "", "Debian kernel `series` (6.12, 7.2, 7.3, ...) instead of --kernel-src: linux-source-X.Y, downloaded and unpacked next to the default tree on first use")
		fs.StringVar(&b.kconfigs, "kconfigs", "", "kconfig fragment directory (default: <repo>/kconfigs)")
		fs.IntVar(&b.jobs, "j", 0, "make -j (default: number of CPUs)")
	}
	if which&withToolchain != 0 {
		fs.StringVar(&b.toolchainFlag, "toolchain", string(kbuild.CompilerDefault), "kernel toolchain: "+compilerList()+" (default: the arch's measured best, host except gcc-14 on ppc64le; host: gcc 12, or clang 19 where the arch row asks; gcc-14 and clang-21 run in the toolchain root, see make deps)")
	}
	if which&withFragments != 0 {
		fs.StringVar(&b.fragments, "fragments", "", "comma-separated fragments, applied in order (default: base,arch/<arch>,ftrace/call-ops where the arch has CALL_OPS else ftrace/direct-calls,preempt/full)")
	}
	fs.StringVar(&b.repo, "repo", "", "ftrace-harness checkout (default: found from the working directory)")
	fs.StringVar(&b.cache, "cache", envOr("FTH_CACHE", defaultCache()), "cache directory for kernels, images and ccache (env FTH_CACHE)")
	fs.BoolVar(&b.verbose, "v", false, "debug logging")
}

// archSuggestion maps what a developer may type for an arch (uname -m,
// GOARCH, the kernel's ARCH=, a prefix) to the harness's name.
func archSuggestion(s string) (string, bool) {
	if a, err := arch.Lookup(s); err == nil {
		return string(a.Name), true
	}
	if n, ok := arch.HostName(s); ok {
		return string(n), true
	}
	for _, a := range arch.All() {
		if a.KernelArch == s {
			return string(a.Name), true
		}
	}
	aliases := map[string]string{"x86-64": "x86_64", "x64": "x86_64", "ppc64el": "ppc64le", "powerpc64le": "ppc64le", "rv64": "riscv64"}
	if n, ok := aliases[s]; ok {
		return n, true
	}
	var names []string
	for _, n := range arch.Names() {
		names = append(names, string(n))
	}
	return closest(s, names)
}

func archList() string {
	var s []string
	for _, n := range arch.Names() {
		s = append(s, string(n))
	}
	return strings.Join(s, ", ")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// defaultCache is shared with `make deps` when writable (it holds the kernel
// source there too), and per user otherwise.
func defaultCache() string {
	if unix.Access("/var/cache/fth", unix.W_OK) == nil {
		return "/var/cache/fth"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "fth")
	}
	return ".fth-cache"
}

func (b *buildFlags) resolve() (arch.Arch, string, []string, error) {
	a, err := arch.Lookup(b.arch)
	if err != nil {
		hint := ""
		if s, ok := archSuggestion(b.arch); ok {
			hint = fmt.Sprintf(": did you mean --arch %s?", s)
		}
		return arch.Arch{}, "", nil, fmt.Errorf("%w: --arch: %v%s", errUsage, err, hint)
	}
	if b.repo == "" {
		b.repo, err = findRepo()
		if err != nil {
			return arch.Arch{}, "", nil, err
		}
	}
	if b.kconfigs == "" {
		b.kconfigs = filepath.Join(b.repo, "kconfigs")
	}
	if err := b.resolveKernel(); err != nil {
		return arch.Arch{}, "", nil, err
	}
	if b.toolchain, err = kbuild.ParseCompiler(b.toolchainFlag); err != nil {
		return arch.Arch{}, "", nil, fmt.Errorf("%w: --toolchain: %v", errUsage, err)
	}
	b.toolchain = b.toolchain.Resolve(a)
	if err := b.needRoot(b.toolchain.InRoot(), "--toolchain "+string(b.toolchain)); err != nil {
		return arch.Arch{}, "", nil, err
	}
	ftrace := "ftrace/direct-calls"
	if a.Has(arch.CallOps) {
		ftrace = "ftrace/call-ops"
	}
	frags := []string{"base", a.Fragment(), ftrace, "preempt/full"}
	if b.fragments != "" {
		frags = strings.Split(b.fragments, ",")
	}
	return a, b.repo, frags, nil
}

// seriesRe is a kernel series as Debian names its linux-source packages.
var seriesRe = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// resolveKernel turns --kernel into the tree's path, fetching Debian's
// linux-source-X.Y with scripts/deps.sh the first time (the same code
// `make deps` runs for 7.3 and 6.12).
func (b *buildFlags) resolveKernel() error {
	if b.kernel == "" {
		return nil
	}
	if !seriesRe.MatchString(b.kernel) {
		return fmt.Errorf("%w: --kernel %q: want a Debian kernel series such as 6.12 or 7.3 (linux-source-X.Y), or --kernel-src for any tree", errUsage, b.kernel)
	}
	if err := oneTree(b.kernel, b.kernelSrc); err != nil {
		return err
	}
	dir, err := fetchSeries(b.repo, b.kernel)
	if err != nil {
		return err
	}
	b.kernelSrc = dir
	return nil
}

// oneTree refuses --kernel (one series or a list) beside a --kernel-src
// (or KERNEL_SRC) that is not the default tree: both name trees.
func oneTree(kernel, src string) error {
	if src != envOr("KERNEL_SRC", defaultKernelSrc) {
		return fmt.Errorf("%w: --kernel %s and --kernel-src %s both name trees: give one", errUsage, kernel, src)
	}
	return nil
}

// fetchSeries returns the tree of Debian's linux-source-<series>, next to
// the default tree, fetching and unpacking it first if it is not there.
func fetchSeries(repo, series string) (string, error) {
	root := filepath.Dir(defaultKernelSrc)
	dir := filepath.Join(root, "linux-source-"+series)
	if _, err := os.Stat(filepath.Join(dir, ".fth-unpacked")); err == nil {
		return dir, nil
	}
	fmt.Fprintf(os.Stderr, "fth: linux-source-%s is not unpacked yet: fetching it (bash scripts/deps.sh source %s)\n", series, series)
	cmd := exec.Command("bash", filepath.Join(repo, "scripts", "deps.sh"), "source", series)
	cmd.Env = append(os.Environ(), "FTH_SRC_ROOT="+root)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("--kernel %s: fetching linux-source-%s: %w", series, series, err)
	}
	return dir, nil
}

// findRepo walks up from the working directory to the ftrace-harness go.mod.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			sc.Scan()
			f.Close()
			if strings.TrimSpace(sc.Text()) == "module "+modulePath {
				return d, nil
			}
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("%w: %s is not inside an ftrace-harness checkout: run from the repo or pass --repo", errUsage, dir)
		}
	}
}

func (b *buildFlags) env(log *slog.Logger, repo string) *runner.Env {
	return &runner.Env{KernelSrc: b.kernelSrc, KconfigDir: b.kconfigs, ModuleDir: repo, CacheDir: b.cache, Jobs: b.jobs, Log: log,
		ToolRoot: b.toolRoot, Progress: progress.New(os.Stderr, progress.IsTerminal(os.Stderr), log)}
}

// needRoot finds and checks the toolchain root when need is true (what,
// e.g. "--qemu 11.1", asks for it), before anything is built: its path is
// scripts/toolroot.sh's answer (keyed by scripts/toolroot/packages), and a
// missing or half-built root says how to build it. b.repo must be set.
func (b *buildFlags) needRoot(need bool, what string) error {
	if !need || b.toolRoot != "" {
		return nil
	}
	script := filepath.Join(b.repo, "scripts", "toolroot.sh")
	out, err := exec.Command("bash", script, "path").Output()
	if err != nil {
		return fmt.Errorf("%s needs the toolchain root: bash %s path: %w", what, script, err)
	}
	root, err := toolroot.Open(strings.TrimSpace(string(out)))
	if err != nil {
		return fmt.Errorf("%s needs the toolchain root: %w", what, err)
	}
	b.toolRoot = root.Dir
	return nil
}

func compilerList() string {
	var s []string
	for _, c := range kbuild.Compilers {
		s = append(s, string(c))
	}
	return strings.Join(s, ", ")
}

func emulatorList() string {
	var s []string
	for _, e := range qemu.Emulators {
		s = append(s, string(e))
	}
	return strings.Join(s, ", ")
}

func cmdBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("build")
	var b buildFlags
	b.register(fs, withAll)
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth build [flags]",
		About: "Builds the kernel for --arch from kconfig fragments, verified symbol by symbol,\nor finds it in the cache (keyed by the tree's content, the fragments and the\ntoolchain): a second run with nothing changed prints \"cached\".",
	}); err != nil {
		return err
	}
	a, repo, frags, err := b.resolve()
	if err != nil {
		return err
	}
	start := time.Now()
	env := b.env(newLogger(stderr, b.verbose), repo)
	k, mods, err := env.BuildKernel(ctx, a, b.toolchain, frags)
	if err != nil {
		return err
	}
	state := "built"
	if k.Cached {
		state = "cached"
	}
	fmt.Fprintf(stdout, "%s: %s %s in %s\n  image:   %s\n  vmlinux: %s\n", state, a.Name, k.Release, time.Since(start).Round(time.Millisecond), k.Image, k.Vmlinux)
	names := make([]string, 0, len(mods))
	for g := range mods {
		names = append(names, strings.TrimSuffix(filepath.Base(g), ".ko"))
	}
	sort.Strings(names)
	if len(names) > 0 {
		fmt.Fprintf(stdout, "  modules: %s\n", strings.Join(names, " "))
	}
	return nil
}

func cmdImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("image")
	var b buildFlags
	b.register(fs, withArch)
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth image [flags]",
		About: "Builds the guest initramfs for --arch (u-root's init and the agent built for\nthe arch's GOARCH), or finds it in the cache. The kernel's modules are added\nper cell, so this needs no kernel.",
		Refused: map[string]string{
			"fragments":  "the initramfs does not depend on the kernel's fragments",
			"kernel-src": "the initramfs needs no kernel tree",
		},
	}); err != nil {
		return err
	}
	a, repo, _, err := b.resolve()
	if err != nil {
		return err
	}
	start := time.Now()
	img, err := b.env(newLogger(stderr, b.verbose), repo).BuildImage(ctx, a)
	if err != nil {
		return err
	}
	state := "built"
	if img.Cached {
		state = "cached"
	}
	fmt.Fprintf(stdout, "%s: initramfs for %s in %s: %s\n", state, a.GOARCH, time.Since(start).Round(time.Millisecond), img.Path)
	return nil
}

// checkRaceTarget refuses, before any build, a racetarget agent option the
// arch cannot run (options.CheckRaceTargets): fth run and fth mutate alike.
func checkRaceTarget(o options.Options, a arch.Arch) error {
	if err := options.CheckRaceTargets(o.RaceTarget, a.GOARCH); err != nil {
		return fmt.Errorf("%w: --agent-arg racetarget on %s: %v", errUsage, a.Name, err)
	}
	return nil
}

// checkReproducer refuses, before any build, a standalone scenario whose
// reproducer is not a directory of results/known/repro with a run.sh,
// naming the ones there are.
func checkReproducer(o options.Options, repo string) error {
	if o.Scenario != event.ScenarioStandalone {
		return nil
	}
	name := o.Reproducer
	if _, err := os.Stat(filepath.Join(repo, known.ReproDir, name, "run.sh")); err == nil {
		return nil
	}
	have, _ := filepath.Glob(filepath.Join(repo, known.ReproDir, "*", "run.sh"))
	for i, p := range have {
		have[i] = filepath.Base(filepath.Dir(p))
	}
	return fmt.Errorf("%w: --agent-arg reproducer=%s: no %s/%s/run.sh; the reproducers are: %s", errUsage, name, known.ReproDir, name, strings.Join(have, ", "))
}
