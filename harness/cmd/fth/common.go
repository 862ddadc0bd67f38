package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/progress"
	"github.com/ftrace-harness/fth/harness/runner"
)

// defaultKernelSrc is where `make deps` unpacks Debian's linux-source-7.3.
const defaultKernelSrc = "/var/cache/fth/src/linux-source-7.3"

// modulePath identifies the ftrace-harness module when looking for its root.
const modulePath = "github.com/ftrace-harness/fth"

// buildFlags are shared by build, image and run.
type buildFlags struct {
	arch      string
	kernelSrc string
	repo      string
	kconfigs  string
	fragments string
	cache     string
	jobs      int
	verbose   bool
}

func (b *buildFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.arch, "arch", "x86_64", "target architecture: "+archList())
	fs.StringVar(&b.kernelSrc, "kernel-src", envOr("KERNEL_SRC", defaultKernelSrc), "kernel source tree (env KERNEL_SRC)")
	fs.StringVar(&b.repo, "repo", "", "ftrace-harness checkout (default: found from the working directory)")
	fs.StringVar(&b.kconfigs, "kconfigs", "", "kconfig fragment directory (default: <repo>/kconfigs)")
	fs.StringVar(&b.fragments, "fragments", "", "comma-separated fragments, applied in order (default: base,arch/<arch>,ftrace/call-ops where the arch has CALL_OPS else ftrace/direct-calls,preempt/full)")
	fs.StringVar(&b.cache, "cache", envOr("FTH_CACHE", defaultCache()), "cache directory for kernels, images and ccache (env FTH_CACHE)")
	fs.IntVar(&b.jobs, "j", 0, "make -j (default: number of CPUs)")
	fs.BoolVar(&b.verbose, "v", false, "debug logging")
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
		return arch.Arch{}, "", nil, fmt.Errorf("%w: --arch: %v", errUsage, err)
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
		Progress: progress.New(os.Stderr, progress.IsTerminal(os.Stderr), log)}
}

func cmdBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b buildFlags
	b.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, repo, frags, err := b.resolve()
	if err != nil {
		return err
	}
	start := time.Now()
	env := b.env(newLogger(stderr, b.verbose), repo)
	k, mods, err := env.BuildKernel(ctx, a, frags)
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
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b buildFlags
	b.register(fs)
	if err := fs.Parse(args); err != nil {
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
