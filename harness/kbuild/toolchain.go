package kbuild

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"runtime"
	"strings"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/internal/choice"
	"github.com/ftrace-harness/fth/harness/toolroot"
)

// This file is all of resolving a toolchain, so that it is read in one
// place: the --toolchain choice (Compiler), what it is on an arch (gcc or
// clang, the cross prefix, LLVM=), where its tools are (the host's PATH,
// or the toolchain root harness/toolroot runs), their versions (the cache
// key and result.json), and what make is told (CROSS_COMPILE, LLVM, CC,
// bwrap). ResolveToolchain is its one entry; a run resolves once and its
// Request carries the answer to the kernel's build and its modules.

// Compiler is a --toolchain choice: which compiler builds the kernel, and
// where it lives.
type Compiler string

// The toolchains fth builds with. Host is what each arch row asks for
// (Debian 12's gcc 12, or LLVM=-19 for riscv64); gcc-12 and clang-19 name
// the host's compilers explicitly; gcc-14 and clang-21 run inside the
// trixie toolchain root (scripts/toolroot.sh).
const (
	// CompilerDefault is the arch row's measured best (arch.Arch's
	// DefaultToolchain): host everywhere but ppc64le. Resolve turns it
	// into a real choice before anything is built or recorded.
	CompilerDefault Compiler = "default"
	CompilerHost    Compiler = "host"
	GCC12           Compiler = "gcc-12"
	GCC14           Compiler = "gcc-14"
	Clang19         Compiler = "clang-19"
	Clang21         Compiler = "clang-21"
)

// Compilers lists every choice, in the order help and errors name them.
var Compilers = []Compiler{CompilerDefault, CompilerHost, GCC12, GCC14, Clang19, Clang21}

// ErrBadCompiler is wrapped by ParseCompiler.
var ErrBadCompiler = errors.New("unknown toolchain")

// ErrMissingTool is wrapped when a build tool is not installed.
var ErrMissingTool = errors.New("missing build tool")

// ParseCompiler validates a --toolchain value; "" is host.
func ParseCompiler(s string) (Compiler, error) {
	return choice.Parse(s, Compilers, CompilerHost, ErrBadCompiler)
}

// Resolve turns default into a's DefaultToolchain, or host where the row
// has none; any other choice is itself.
func (c Compiler) Resolve(a arch.Arch) Compiler {
	return choice.Resolve(c, CompilerDefault, a.DefaultToolchain, CompilerHost)
}

// IsHost reports whether c is the host's (host or unset).
func (c Compiler) IsHost() bool { return c == "" || c == CompilerHost }

// InRoot reports whether c runs inside the toolchain root.
func (c Compiler) InRoot() bool { return c == GCC14 || c == Clang21 }

// For names the compiler c is on arch a: host becomes gcc-12 or clang-19,
// as the arch row asks (Debian 12's compilers); the others are themselves.
func (c Compiler) For(a arch.Arch) Compiler {
	if !c.IsHost() {
		return c
	}
	if a.LLVM != "" {
		return Compiler("clang" + a.LLVM)
	}
	return GCC12
}

// Clang reports whether c builds a with clang.
func (c Compiler) Clang(a arch.Arch) bool { return strings.HasPrefix(string(c.For(a)), "clang-") }

// major is the compiler's major version: "14" for gcc-14.
func (c Compiler) major() string {
	_, v, _ := strings.Cut(string(c), "-")
	return v
}

// Toolchain is a --toolchain choice resolved for one arch: everything the
// kernel's build and its modules' need, and what the run records. Only
// ResolveToolchain makes one that builds.
type Toolchain struct {
	// Choice is the --toolchain choice this is, default resolved and
	// unset spelled host (result.json's request.toolchain).
	Choice Compiler
	// Compiler is what Choice is on Arch, host resolved: gcc-12 or
	// clang-19 for host (result.json's kernel.compiler).
	Compiler Compiler
	// Arch is the arch it was resolved for.
	Arch arch.Name
	// CrossCompile is the CROSS_COMPILE prefix, "" for a native build.
	CrossCompile string
	// LLVM is the kernel's LLVM= value ("-19"), "" for a gcc build.
	LLVM string
	// CC is the compiler make is told to use, with ccache in front when present.
	CC string
	// Version is the compiler's first --version line, plus pahole's version:
	// both change the output, so both are part of the cache key. A
	// toolchain in the root ends in rootMark, so that its key can never be
	// a host toolchain's.
	Version string
	// Root, when its Dir is set, is the toolchain root every build command
	// runs in (gcc-14, clang-21); zero for the host's compilers.
	Root toolroot.Root
}

// InRoot reports whether tc's commands run inside the toolchain root.
func (tc Toolchain) InRoot() bool { return tc.Root.Dir != "" }

// rootMark ends the Version of a toolchain in the root.
const rootMark = "; in the toolchain root"

// hostTools are needed for any kernel build, with the package that has each.
var hostTools = []struct{ bin, pkg string }{
	{"make", "make"},
	{"flex", "flex"},
	{"bison", "bison"},
	{"bc", "bc"},
	{"pahole", "dwarves"},
	{"perl", "perl"},
}

// ResolveToolchain resolves the --toolchain choice c for arch a, once per
// kernel: it decides the compiler, finds it and the build tools (on the
// host, or in the complete toolchain root at rootDir for gcc-14 and
// clang-21), and reads their versions. default becomes the arch row's
// choice. A missing tool or root is an error naming --toolchain or the
// package, and the fix, before anything is built.
//
// Host is the arch row's compilers exactly as before --toolchain existed,
// so that the kernels cached then keep their keys; gcc-12 and clang-19 are
// the host's compilers (the same toolchain, and key, as host where the
// row asks for that compiler).
func ResolveToolchain(ctx context.Context, a arch.Arch, c Compiler, rootDir string) (Toolchain, error) {
	c = c.Resolve(a)
	var (
		tc  Toolchain
		err error
	)
	switch {
	case c.IsHost():
		c = CompilerHost
		tc, err = detectHost(ctx, a)
	case c.InRoot():
		tc, err = resolveInRoot(ctx, a, c, rootDir)
	default:
		tc, err = resolveHostCompiler(ctx, a, c)
	}
	if err != nil {
		return Toolchain{}, err
	}
	tc.Choice, tc.Compiler, tc.Arch = c, c.For(a), a.Name
	return tc, nil
}

// detectHost finds the host's tools to build for a, as the arch row asks
// (gcc, cross or native, or LLVM=a.LLVM), and fails naming the Debian
// package to install for the first one missing.
func detectHost(ctx context.Context, a arch.Arch) (Toolchain, error) {
	for _, t := range hostTools {
		if _, err := exec.LookPath(t.bin); err != nil {
			return Toolchain{}, fmt.Errorf("%w: %s not found: apt-get install %s (or run make deps)", ErrMissingTool, t.bin, t.pkg)
		}
	}
	tc := Toolchain{}
	compiler := ""
	if a.LLVM != "" {
		// clang targets every arch itself; LLVM= picks clang, lld and llvm-* with
		// that version suffix, so all of them must be there.
		tc.LLVM = a.LLVM
		v := strings.TrimPrefix(a.LLVM, "-")
		for _, t := range []struct{ bin, pkg string }{{"clang", "clang"}, {"ld.lld", "lld"}, {"llvm-objcopy", "llvm"}, {"llvm-ar", "llvm"}} {
			if _, err := exec.LookPath(t.bin + a.LLVM); err != nil {
				return Toolchain{}, fmt.Errorf("%w: %s not found, needed to build %s with LLVM=%s: apt-get install %s-%s", ErrMissingTool, t.bin+a.LLVM, a.Name, a.LLVM, t.pkg, v)
			}
		}
		compiler = "clang" + a.LLVM
	} else {
		tc.CrossCompile = crossPrefix(a)
		compiler = tc.CrossCompile + "gcc"
		if _, err := exec.LookPath(compiler); err != nil {
			pkg := "gcc"
			if tc.CrossCompile != "" {
				pkg = a.CrossPackage
			}
			return Toolchain{}, fmt.Errorf("%w: %s not found, needed to build for %s: apt-get install %s", ErrMissingTool, compiler, a.Name, pkg)
		}
	}
	tc.CC = compiler
	if _, err := exec.LookPath("ccache"); err == nil {
		tc.CC = "ccache " + compiler
	}
	gv, err := firstLine(ctx, compiler, "--version")
	if err != nil {
		return Toolchain{}, err
	}
	pv, err := firstLine(ctx, "pahole", "--version")
	if err != nil {
		return Toolchain{}, err
	}
	tc.Version = gv + "; pahole " + pv
	return tc, nil
}

// resolveHostCompiler is gcc-12 or clang-19: the host's tools with the
// compiler c names, whatever the arch row asks for, checked to be that
// version.
func resolveHostCompiler(ctx context.Context, a arch.Arch, c Compiler) (Toolchain, error) {
	b := a
	b.LLVM = ""
	if c.Clang(a) {
		b.LLVM = "-" + c.major()
	}
	tc, err := detectHost(ctx, b)
	if err != nil {
		return Toolchain{}, fmt.Errorf("--toolchain %s: %w", c, err)
	}
	if !c.Clang(a) && !gccMajor(tc.Version, c.major()) {
		return Toolchain{}, fmt.Errorf("--toolchain %s: the host's %sgcc is %q, not gcc %s", c, tc.CrossCompile, firstPart(tc.Version), c.major())
	}
	return tc, nil
}

// resolveInRoot is gcc-14 or clang-21: the tools of the complete root at
// rootDir, their versions read inside it.
func resolveInRoot(ctx context.Context, a arch.Arch, c Compiler, rootDir string) (Toolchain, error) {
	root, err := toolroot.Open(rootDir)
	if err != nil {
		return Toolchain{}, fmt.Errorf("--toolchain %s: %w", c, err)
	}
	tc := Toolchain{Root: root}
	var tools []string
	for _, t := range hostTools {
		tools = append(tools, t.bin)
	}
	compiler := ""
	if c.Clang(a) {
		tc.LLVM = "-" + c.major()
		compiler = "clang" + tc.LLVM
		for _, t := range []string{"clang", "ld.lld", "llvm-objcopy", "llvm-ar"} {
			tools = append(tools, t+tc.LLVM)
		}
	} else {
		tc.CrossCompile = crossPrefix(a)
		// Named with its version: the root's unversioned gcc is whatever
		// trixie's default is.
		compiler = tc.CrossCompile + "gcc-" + c.major()
		tools = append(tools, compiler)
	}
	for _, t := range tools {
		if err := root.Has(t); err != nil {
			return Toolchain{}, fmt.Errorf("--toolchain %s for %s: %w", c, a.Name, err)
		}
	}
	tc.CC = compiler
	if root.Has("ccache") == nil {
		tc.CC = "ccache " + compiler
	}
	run := func(name string, args ...string) (string, error) {
		bin, bargs, err := root.Command(nil, "", name, args...)
		if err != nil {
			return "", err
		}
		line, err := firstLine(ctx, bin, bargs...)
		if err != nil {
			return "", fmt.Errorf("--toolchain %s: %s in the root %s: %w", c, name, root.Dir, err)
		}
		return line, nil
	}
	gv, err := run(compiler, "--version")
	if err != nil {
		return Toolchain{}, err
	}
	pv, err := run("pahole", "--version")
	if err != nil {
		return Toolchain{}, err
	}
	tc.Version = gv + "; pahole " + pv + rootMark
	return tc, nil
}

// crossPrefix is the CROSS_COMPILE gcc needs for a from this host: none
// when a is the host's own arch.
func crossPrefix(a arch.Arch) string {
	if host, _ := arch.HostName(runtime.GOARCH); host == a.Name {
		return ""
	}
	return a.CrossCompile
}

// gccVersionRe finds gcc's version at the end of its first --version line:
// "gcc (Debian 12.2.0-14+deb12u1) 12.2.0".
var gccVersionRe = regexp.MustCompile(`\) (\d+)\.\d+\.\d+`)

// gccMajor reports whether the gcc version line in v is of major version m.
func gccMajor(v, m string) bool {
	match := gccVersionRe.FindStringSubmatch(firstPart(v))
	return match != nil && match[1] == m
}

// firstPart is the compiler's line of a Toolchain.Version.
func firstPart(v string) string {
	s, _, _ := strings.Cut(v, ";")
	return s
}

func firstLine(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// makeEnv is what make's environment says of tc: the cross prefix, empty
// for a native or clang build, and LLVM= for a clang one. CC goes on
// make's command line (see builder.make), where it beats the Makefile's.
func (tc Toolchain) makeEnv() []string {
	env := []string{"CROSS_COMPILE=" + tc.CrossCompile}
	if tc.LLVM != "" {
		env = append(env, "LLVM="+tc.LLVM)
	}
	return env
}

// command returns what runs name with args for the toolchain: itself for a
// host toolchain, bwrap into the root otherwise, with mounts bound and dir
// as the working directory.
func (tc Toolchain) command(mounts []toolroot.Mount, dir, name string, args []string) (string, []string, error) {
	if !tc.InRoot() {
		return name, args, nil
	}
	if _, err := exec.LookPath(toolroot.Bwrap); err != nil {
		return "", nil, fmt.Errorf("%w: bwrap not found, needed for --toolchain %s: apt-get install bubblewrap (or run make deps)", ErrMissingTool, tc.Choice)
	}
	return tc.Root.Command(mounts, dir, name, args...)
}

// checkFor refuses a toolchain that ResolveToolchain did not resolve for
// a: a build with it would run an empty CC, or another arch's compiler.
func (tc Toolchain) checkFor(a arch.Name) error {
	if tc.CC == "" || tc.Arch != a {
		return fmt.Errorf("kbuild: a %s build was handed a toolchain resolved for %q, not %s: resolve it with ResolveToolchain", a, tc.Arch, a)
	}
	return nil
}
