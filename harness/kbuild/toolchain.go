package kbuild

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/toolroot"
)

// ErrMissingTool is wrapped when a build tool is not installed.
var ErrMissingTool = errors.New("missing build tool")

// Toolchain is the compiler and helpers a build uses.
type Toolchain struct {
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
	// Name is the --toolchain choice this is.
	Name Compiler
	// Root, when its Dir is set, is the toolchain root every build command
	// runs in (gcc-14, clang-21); zero for the host's compilers.
	Root toolroot.Root
}

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

// DetectToolchain finds the tools to build for a, and fails naming the Debian
// package to install for the first one missing.
func DetectToolchain(ctx context.Context, a arch.Arch) (Toolchain, error) {
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
		if host, _ := arch.HostName(runtime.GOARCH); host != a.Name {
			tc.CrossCompile = a.CrossCompile
		}
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

func firstLine(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}
