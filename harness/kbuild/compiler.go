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

// Compiler is a --toolchain choice: which compiler builds the kernel, and
// where it lives.
type Compiler string

// The toolchains fth builds with. Host is what each arch row asks for
// (DetectToolchain: Debian 12's gcc 12, or LLVM=-19 for riscv64); gcc-12
// and clang-19 name the host's compilers explicitly; gcc-14 and clang-21
// run inside the trixie toolchain root (scripts/toolroot.sh).
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

// ResolveToolchain finds the tools c builds a with. Host is DetectToolchain
// itself, byte for byte, so that the kernels cached before --toolchain
// existed keep their keys; gcc-12 and clang-19 are the host's compilers
// (the same toolchain, and key, as host where the arch row asks for that
// compiler); gcc-14 and clang-21 come from the root at rootDir, which must
// be complete.
func ResolveToolchain(ctx context.Context, a arch.Arch, c Compiler, rootDir string) (Toolchain, error) {
	if c.IsHost() {
		tc, err := DetectToolchain(ctx, a)
		tc.Name = CompilerHost
		return tc, err
	}
	if !c.InRoot() {
		b := a
		b.LLVM = ""
		if c.Clang(a) {
			b.LLVM = "-" + c.major()
		}
		tc, err := DetectToolchain(ctx, b)
		if err != nil {
			return Toolchain{}, fmt.Errorf("--toolchain %s: %w", c, err)
		}
		if !c.Clang(a) && !gccMajor(tc.Version, c.major()) {
			return Toolchain{}, fmt.Errorf("--toolchain %s: the host's %sgcc is %q, not gcc %s", c, tc.CrossCompile, firstPart(tc.Version), c.major())
		}
		tc.Name = c
		return tc, nil
	}
	root, err := toolroot.Open(rootDir)
	if err != nil {
		return Toolchain{}, fmt.Errorf("--toolchain %s: %w", c, err)
	}
	tc := Toolchain{Name: c, Root: root}
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
		if host, _ := arch.HostName(runtime.GOARCH); host != a.Name {
			tc.CrossCompile = a.CrossCompile
		}
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

// command returns what runs name with args for the toolchain: itself for a
// host toolchain, bwrap into the root otherwise, with mounts bound and dir
// as the working directory.
func (tc Toolchain) command(mounts []toolroot.Mount, dir, name string, args []string) (string, []string, error) {
	if tc.Root.Dir == "" {
		return name, args, nil
	}
	if _, err := exec.LookPath(toolroot.Bwrap); err != nil {
		return "", nil, fmt.Errorf("%w: bwrap not found, needed for --toolchain %s: apt-get install bubblewrap (or run make deps)", ErrMissingTool, tc.Name)
	}
	return tc.Root.Command(mounts, dir, name, args...)
}
