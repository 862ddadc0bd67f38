// Package kbuild turns a kernel source tree plus kconfig fragments into a
// verified, cached kernel build.
//
// The flow is: parse fragments → check every symbol exists with the right type
// (before any build starts) → look up the content-keyed cache → configure with
// the tree's own merge_config.sh on allnoconfig → verify every requested value
// survived → make, out of tree, through ccache → write the manifest last.
package kbuild

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/internal/proc"
	"github.com/ftrace-harness/fth/harness/toolroot"
)

// Request says what to build.
type Request struct {
	Arch arch.Arch
	// Source is the kernel tree (see OpenSource).
	Source Source
	// KconfigDir is the kconfigs/ directory; Fragments are names relative to it,
	// applied in order on top of allnoconfig.
	KconfigDir string
	Fragments  []string
	// CacheDir holds kernels/<arch>-<key>/ entries and the ccache directory.
	CacheDir string
	// Jobs is make -j; 0 means the number of CPUs.
	Jobs int
	// Progress, if set, is called from time to time during make.
	Progress func(Progress)
	// Patches change the source for this build only (see Patch): the
	// kernel is built from the unpatched one's build directory.
	Patches []Patch
	// Toolchain builds the kernel and its modules: ResolveToolchain's
	// answer for Arch, resolved once by the caller for every build of
	// this kernel (the unpatched one under a patched one, the modules).
	Toolchain Toolchain
}

// Progress is a snapshot of a running build.
type Progress struct {
	// Target is the make target being built (the image, or "modules").
	Target string
	// Steps counts the make lines seen so far (CC, LD, BTF ...).
	Steps int
	// Total is how many lines the same target printed in this arch's last
	// build, 0 when there was none: a build of other fragments differs by a
	// few percent, which is good enough for a percentage and an ETA.
	Total   int
	Current string
	Elapsed time.Duration
}

// BuildError is a failed make, with the tail of its output.
type BuildError struct {
	Step string
	Err  error
	Tail []string
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("%s failed: %v\n--- last %d lines of output ---\n%s", e.Step, e.Err, len(e.Tail), strings.Join(e.Tail, "\n"))
}

func (e *BuildError) Unwrap() error { return e.Err }

// Build returns the kernel req describes, from the cache when an intact entry
// exists, building it otherwise. A kernel whose own BTF it will refuse at
// boot is an error wrapping ErrUnusableBTF, cached or not: the entry is
// kept (the build is sound), and the check costs a read of its BTF.
func Build(ctx context.Context, log *slog.Logger, req Request) (Kernel, error) {
	if err := req.Toolchain.checkFor(req.Arch.Name); err != nil {
		return Kernel{}, err
	}
	k, err := build(ctx, log, req)
	if err != nil {
		return k, err
	}
	if err := CheckBTF(k.Vmlinux); err != nil {
		return Kernel{}, fmt.Errorf("%s kernel built with %s (%s): %w; no BPF program could load in it, so it is not booted: choose another --toolchain", k.Arch, k.Compiler, k.Toolchain, err)
	}
	return k, nil
}

func build(ctx context.Context, log *slog.Logger, req Request) (Kernel, error) {
	if len(req.Patches) > 0 && !changesKconfig(req.Patches) {
		return buildPatched(ctx, log, req)
	}
	frags, left, err := LoadForVersion(req.KconfigDir, req.Fragments, req.Source.Version)
	if err != nil {
		return Kernel{}, err
	}
	for _, g := range left {
		log.Warn("fragment setting not asked of this kernel", "setting", g.String(), "version", req.Source.Version)
	}
	want := Merge(frags)
	idx, err := IndexTree(req.Source.Dir)
	if err != nil {
		return Kernel{}, err
	}
	if err := Precheck(want, idx); err != nil {
		return Kernel{}, fmt.Errorf("fragments %s ask for what Linux %s cannot give (nothing was built): %w", strings.Join(req.Fragments, " + "), req.Source.Version, err)
	}
	key := Key(req.Source, req.Arch.Name, frags, req.Toolchain, req.Patches...)
	entry, unlock, err := openEntry(ctx, log, req, key)
	if err != nil {
		return Kernel{}, err
	}
	defer unlock()

	k, err := loadManifest(entry)
	switch {
	case err == nil:
		k.Cached = true
		if cfg, err := os.ReadFile(filepath.Join(k.BuildDir, ".config")); err == nil {
			final := ParseConfig(cfg)
			k.Verified, k.Observed = verified(want, final), Observe(final)
			if final["MODULES"] == "y" && k.Modules == nil {
				// An entry from before modules were built: add them to the
				// finished tree (only the modules compile) rather than rebuild.
				b := &builder{req: req, out: k.BuildDir, log: log}
				if err := b.make(ctx, "modules"); err != nil {
					return Kernel{}, err
				}
				if k.Modules, err = findModules(k.BuildDir); err != nil {
					return Kernel{}, fmt.Errorf("built modules: %w", err)
				}
				if err := writeManifest(entry, k); err != nil {
					return Kernel{}, fmt.Errorf("write kernel manifest: %w", err)
				}
			}
		}
		markUsed(entry)
		log.Info("kernel cached", "arch", req.Arch.Name, "release", k.Release, "entry", entry)
		return k, nil
	case errors.Is(err, os.ErrNotExist):
	default:
		log.Warn("kernel cache entry is corrupt, rebuilding", "entry", entry, "err", err)
		_ = os.Remove(filepath.Join(entry, manifestName))
	}

	if err := newCacheSpace(log, req.CacheDir).makeRoom(ctx, fullBuildNeed, entry); err != nil {
		return Kernel{}, err
	}
	start := time.Now()
	b := &builder{req: req, out: filepath.Join(entry, "build"), log: log, prevSteps: previousSteps(req.CacheDir, req.Arch.Name), steps: map[string]int{}}
	if len(req.Patches) > 0 {
		// A patch to a Kconfig file changes what the configuration can
		// be: the whole build, configure included, runs with the patched
		// files bound over the tree (a copy of an unpatched build would
		// keep the unpatched .config).
		if b.ov, err = prepareOverlay(ctx, req.Source.Dir, req.Patches, filepath.Join(entry, "patched")); err != nil {
			return Kernel{}, err
		}
		log.Info("building a kernel with a Kconfig patch from scratch", "arch", req.Arch.Name, "patches", patchNames(req.Patches), "files", strings.Join(b.ov.files, " "))
	}
	if err := b.configure(ctx, frags); err != nil {
		return Kernel{}, err
	}
	cfgText, err := os.ReadFile(filepath.Join(b.out, ".config"))
	if err != nil {
		return Kernel{}, err
	}
	final := ParseConfig(cfgText)
	if err := Verify(want, final, idx); err != nil {
		return Kernel{}, fmt.Errorf("configure %s with %s (nothing was built): %w", req.Arch.Name, strings.Join(req.Fragments, " + "), err)
	}
	if err := b.make(ctx, req.Arch.MakeTarget); err != nil {
		return Kernel{}, err
	}
	var mods map[string]string
	if final["MODULES"] == "y" {
		// The samples the agent loads are modules; a separate make keeps the
		// image step's progress and error tail about the image alone.
		if err := b.make(ctx, "modules"); err != nil {
			return Kernel{}, err
		}
		if mods, err = findModules(b.out); err != nil {
			return Kernel{}, fmt.Errorf("built modules: %w", err)
		}
	}
	release, err := os.ReadFile(filepath.Join(b.out, "include/config/kernel.release"))
	if err != nil {
		return Kernel{}, fmt.Errorf("read kernel release: %w", err)
	}
	k = Kernel{
		Arch:          req.Arch.Name,
		Key:           key,
		SourceDir:     req.Source.Dir,
		SourceVersion: req.Source.Version,
		Release:       strings.TrimSpace(string(release)),
		Image:         filepath.Join(b.out, req.Arch.Image),
		Vmlinux:       filepath.Join(b.out, "vmlinux"),
		BuildDir:      b.out,
		Fragments:     req.Fragments,
		NotAsked:      notAsked(left),
		ConfigSHA256:  sha256Hex(cfgText),
		Verified:      verified(want, final),
		Modules:       mods,
		Toolchain:     req.Toolchain.Version,
		Compiler:      string(req.Toolchain.Compiler),
		BuiltAt:       time.Now().UTC(),
		BuildTime:     time.Since(start).Seconds(),
		BuildSteps:    b.steps,
	}
	k.Observed = Observe(final)
	if len(req.Patches) > 0 {
		k.Patches, k.PatchDir, k.PatchedFiles = patchNames(req.Patches), b.ov.dir, b.ov.files
	}
	if err := k.recordArtifacts(); err != nil {
		return Kernel{}, err
	}
	if err := writeManifest(entry, k); err != nil {
		return Kernel{}, fmt.Errorf("write kernel manifest: %w", err)
	}
	markUsed(entry)
	log.Info("kernel built", "arch", req.Arch.Name, "release", k.Release, "seconds", int(k.BuildTime), "entry", entry)
	return k, nil
}

// openEntry creates (if need be) and locks the cache entry of key; the
// caller must unlock it.
func openEntry(ctx context.Context, log *slog.Logger, req Request, key string) (string, func(), error) {
	entry := filepath.Join(req.CacheDir, "kernels", fmt.Sprintf("%s-%s", req.Arch.Name, key[:16]))
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return "", nil, fmt.Errorf("kernel cache: %w", err)
	}
	unlock, err := lock(ctx, log, entry)
	if err != nil {
		return "", nil, err
	}
	return entry, unlock, nil
}

// lock serialises builds of one entry across harness processes (two matrix
// cells, or two terminals), so neither sees the other's half-written tree.
func lock(ctx context.Context, log *slog.Logger, entry string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(entry, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for waited := false; ; waited = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", entry, err)
		}
		if !waited {
			log.Info("waiting for another build of the same kernel", "entry", entry)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

type builder struct {
	req Request
	out string
	log *slog.Logger
	// ov, when it has files, is bound over the source tree for every
	// command (a patched build).
	ov overlay
	// prevSteps are the step counts of this arch's previous build, by make
	// target, for a percentage; steps records this build's.
	prevSteps, steps map[string]int
}

func (b *builder) env() []string {
	env := append(hostEnv(), "ARCH="+b.req.Arch.KernelArch)
	env = append(env, b.req.Toolchain.makeEnv()...)
	return append(env,
		"CCACHE_DIR="+filepath.Join(b.req.CacheDir, "ccache"),
		// With debug info on, ccache hashes the working directory (the O= dir)
		// by default, so two cache entries would never share a compile. The
		// source tree stays at one path, so its absolute paths are stable.
		"CCACHE_NOHASHDIR=1",
		// Fixed build metadata keeps init/version.o and ccache hits stable.
		"KBUILD_BUILD_USER=fth",
		"KBUILD_BUILD_HOST=fth",
		"KBUILD_BUILD_TIMESTAMP=1970-01-01",
	)
}

func (b *builder) configure(ctx context.Context, frags []Fragment) error {
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		return err
	}
	// A stale .config from an earlier, different request would leak into the
	// merge; merge_config.sh -n starts from allnoconfig plus the fragments only.
	_ = os.Remove(filepath.Join(b.out, ".config"))
	args := []string{"-n", "-O", b.out}
	for _, f := range frags {
		path := filepath.Join(b.req.KconfigDir, f.Name)
		if len(f.Left) > 0 {
			// merge_config.sh reads files: the fragment as this
			// kernel version is asked it.
			path = filepath.Join(b.out, "fth-fragments", strings.ReplaceAll(f.Name, "/", "_"))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, f.EffectiveText(), 0o644); err != nil {
				return err
			}
		}
		args = append(args, path)
	}
	b.log.Info("configuring", "arch", b.req.Arch.Name, "fragments", strings.Join(b.req.Fragments, " "))
	_, err := b.run(ctx, "merge_config", filepath.Join(b.req.Source.Dir, "scripts/kconfig/merge_config.sh"), args, nil)
	return err
}

func (b *builder) make(ctx context.Context, target string) error {
	jobs := b.req.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	args := []string{"-C", b.req.Source.Dir, "O=" + b.out, "CC=" + b.req.Toolchain.CC, fmt.Sprintf("-j%d", jobs), target}
	b.log.Info("building kernel", "arch", b.req.Arch.Name, "target", target, "jobs", jobs, "out", b.out)
	var progress func(Progress)
	if b.req.Progress != nil {
		progress = func(p Progress) {
			p.Target, p.Total = target, b.prevSteps[target]
			b.req.Progress(p)
		}
	}
	steps, err := b.run(ctx, "make "+target, "make", args, progress)
	if b.steps != nil {
		b.steps[target] = steps
	}
	return err
}

// mounts are the host paths a build in the toolchain root sees, each at
// its own path: the tree, the cache (build directories, ccache, external
// modules), the fragments, /tmp, and a patched build's files laid over
// the tree (the root's bwrap binds them, where a host build uses unshare).
func (b *builder) mounts() []toolroot.Mount {
	ms := []toolroot.Mount{
		{Path: b.req.Source.Dir, Mode: toolroot.RW},
		{Path: b.req.CacheDir, Mode: toolroot.RW},
		{Path: b.out, Mode: toolroot.RW},
		{Path: b.req.KconfigDir, Mode: toolroot.RO},
		{Path: os.TempDir(), Mode: toolroot.RW},
	}
	for _, f := range b.ov.files {
		ms = append(ms, toolroot.Mount{Path: filepath.Join(b.req.Source.Dir, f), Src: filepath.Join(b.ov.dir, f), Mode: toolroot.RO})
	}
	return ms
}

// stepRe matches kbuild's quiet output lines: "  CC      kernel/fork.o".
var stepRe = regexp.MustCompile(`^\s{2}([A-Z][A-Z0-9_-]*)\s+(\S.*)$`)

const tailLines = 40

// run runs one build command and returns how many kbuild step lines it
// printed.
func (b *builder) run(ctx context.Context, step, name string, args []string, progress func(Progress)) (int, error) {
	if !b.req.Toolchain.InRoot() {
		name, args = b.ov.wrap(b.req.Source.Dir, name, args)
	} else {
		var err error
		if name, args, err = b.req.Toolchain.command(b.mounts(), b.req.Source.Dir, name, args); err != nil {
			return 0, err
		}
	}
	cmd := proc.Command(ctx, 10*time.Second, name, args...)
	cmd.Dir = b.req.Source.Dir
	cmd.Env = b.env()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	var (
		mu   sync.Mutex
		tail []string
		p    Progress
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		last := time.Now()
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			tail = append(tail, line)
			if len(tail) > tailLines {
				tail = tail[len(tail)-tailLines:]
			}
			if m := stepRe.FindStringSubmatch(line); m != nil {
				p.Steps++
				p.Current = m[1] + " " + m[2]
			}
			p.Elapsed = time.Since(start)
			snap := p
			mu.Unlock()
			if progress != nil && time.Since(last) >= 5*time.Second {
				last = time.Now()
				progress(snap)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
	}
	pw.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return p.Steps, fmt.Errorf("%s: interrupted after %s: %w", step, time.Since(start).Round(time.Second), ctx.Err())
		}
		return p.Steps, &BuildError{Step: step, Err: err, Tail: append([]string(nil), tail...)}
	}
	return p.Steps, nil
}

// findModules lists the .ko files under dir by module name (file name
// without .ko), so that a caller asks for "ftrace-direct" without knowing
// where in the tree it lives.
func findModules(dir string) (map[string]string, error) {
	mods := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".ko") {
			mods[strings.TrimSuffix(d.Name(), ".ko")] = path
		}
		return nil
	})
	return mods, err
}

// notAsked says each left-out setting, for the manifest and result.json.
func notAsked(left []Gated) []string {
	var out []string
	for _, g := range left {
		out = append(out, g.String())
	}
	return out
}
