package kbuild

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/toolroot"
)

func TestParseCompiler(t *testing.T) {
	tests := []struct {
		in   string
		want Compiler
		bad  bool
	}{
		{"", CompilerHost, false},
		{"host", CompilerHost, false},
		{"gcc-12", GCC12, false},
		{"gcc-14", GCC14, false},
		{"clang-19", Clang19, false},
		{"clang-21", Clang21, false},
		{"gcc", "", true},
		{"gcc-13", "", true},
		{"clang", "", true},
		{"GCC-14", "", true},
	}
	for _, tt := range tests {
		got, err := ParseCompiler(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrBadCompiler) || !strings.Contains(err.Error(), "choose one of default, host, gcc-12, gcc-14, clang-19, clang-21") {
				t.Errorf("ParseCompiler(%q) = %v, want ErrBadCompiler listing the choices", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseCompiler(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestCompilerFor(t *testing.T) {
	tests := []struct {
		c      Compiler
		arch   string
		want   Compiler
		clang  bool
		inRoot bool
	}{
		{CompilerHost, "x86_64", GCC12, false, false},
		{"", "arm64", GCC12, false, false},
		{CompilerHost, "riscv64", Clang19, true, false},
		{GCC12, "riscv64", GCC12, false, false},
		{GCC14, "x86_64", GCC14, false, true},
		{Clang19, "x86_64", Clang19, true, false},
		{Clang21, "ppc64le", Clang21, true, true},
	}
	for _, tt := range tests {
		a, _ := arch.Lookup(tt.arch)
		if got := tt.c.For(a); got != tt.want {
			t.Errorf("%q.For(%s) = %q, want %q", tt.c, tt.arch, got, tt.want)
		}
		if got := tt.c.Clang(a); got != tt.clang {
			t.Errorf("%q.Clang(%s) = %v, want %v", tt.c, tt.arch, got, tt.clang)
		}
		if got := tt.c.InRoot(); got != tt.inRoot {
			t.Errorf("%q.InRoot() = %v, want %v", tt.c, got, tt.inRoot)
		}
	}
}

func TestGCCMajor(t *testing.T) {
	tests := []struct {
		version, major string
		want           bool
	}{
		{"gcc (Debian 12.2.0-14+deb12u1) 12.2.0; pahole v1.24", "12", true},
		{"aarch64-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0; pahole v1.24", "12", true},
		{"gcc-14 (Debian 14.2.0-19) 14.2.0; pahole v1.30" + rootMark, "14", true},
		{"gcc-14 (Debian 14.2.0-19) 14.2.0", "12", false},
		{"Debian clang version 19.1.7 (3~deb12u1); pahole v1.24", "12", false},
	}
	for _, tt := range tests {
		if got := gccMajor(tt.version, tt.major); got != tt.want {
			t.Errorf("gccMajor(%q, %s) = %v, want %v", tt.version, tt.major, got, tt.want)
		}
	}
}

// Host is the arch row's compilers exactly, so the kernels cached before
// --toolchain keep their keys; naming the arch row's compiler explicitly
// is the same toolchain; another host compiler is another key.
func TestHostToolchainKeepsItsKey(t *testing.T) {
	src := Source{Identity: "tree"}
	frags := []Fragment{{Name: "base", Text: []byte("CONFIG_X=y\n")}}
	for _, tt := range []struct {
		arch     string
		same     Compiler
		other    Compiler
		otherBin string
	}{
		{"x86_64", GCC12, Clang19, "clang-19"},
		{"riscv64", Clang19, GCC12, "riscv64-linux-gnu-gcc"},
	} {
		t.Run(tt.arch, func(t *testing.T) {
			a, _ := arch.Lookup(tt.arch)
			det, err := detectHost(t.Context(), a)
			if errors.Is(err, ErrMissingTool) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			host, err := ResolveToolchain(t.Context(), a, CompilerHost, "")
			if err != nil {
				t.Fatal(err)
			}
			if Key(src, a.Name, frags, host) != Key(src, a.Name, frags, det) || host.CC != det.CC || host.Version != det.Version {
				t.Errorf("host = %+v, detectHost = %+v: the host key moved", host, det)
			}
			same, err := ResolveToolchain(t.Context(), a, tt.same, "")
			if err != nil {
				t.Fatal(err)
			}
			if Key(src, a.Name, frags, same) != Key(src, a.Name, frags, det) {
				t.Errorf("--toolchain %s on %s is host's compiler but keys differently: %+v", tt.same, tt.arch, same)
			}
			if _, err := exec.LookPath(tt.otherBin); err != nil {
				t.Skip(err)
			}
			other, err := ResolveToolchain(t.Context(), a, tt.other, "")
			if err != nil {
				t.Fatal(err)
			}
			if Key(src, a.Name, frags, other) == Key(src, a.Name, frags, det) {
				t.Errorf("--toolchain %s on %s keys like host", tt.other, tt.arch)
			}
		})
	}
}

// A toolchain in the root keys differently from the host's even with
// identical version lines.
func TestRootToolchainKeyDiffers(t *testing.T) {
	src := Source{Identity: "tree"}
	host := Toolchain{CC: "ccache gcc", Version: "gcc (Debian 14.2.0-19) 14.2.0; pahole v1.30"}
	root := host
	root.Version += rootMark
	root.Root = toolroot.Root{Dir: "/r"}
	if Key(src, arch.X86_64, nil, host) == Key(src, arch.X86_64, nil, root) {
		t.Error("a root toolchain has the host's key")
	}
}

func TestMissingCrossCompiler(t *testing.T) {
	a, _ := arch.Lookup("ppc64le")
	a.CrossCompile = "definitely-not-installed-"
	_, err := detectHost(t.Context(), a)
	if !errors.Is(err, ErrMissingTool) || !strings.Contains(err.Error(), "apt-get install "+a.CrossPackage) {
		t.Errorf("err = %v, want ErrMissingTool naming %s", err, a.CrossPackage)
	}
}

func TestMissingLLVM(t *testing.T) {
	a, _ := arch.Lookup("riscv64")
	a.LLVM = "-999"
	_, err := detectHost(t.Context(), a)
	if !errors.Is(err, ErrMissingTool) || !strings.Contains(err.Error(), "apt-get install clang-999") {
		t.Errorf("err = %v, want ErrMissingTool naming clang-999", err)
	}
}

func TestResolveRootToolchainMissingRoot(t *testing.T) {
	a, _ := arch.Lookup("x86_64")
	for _, c := range []Compiler{GCC14, Clang21} {
		_, err := ResolveToolchain(t.Context(), a, c, filepath.Join(t.TempDir(), "none"))
		if !errors.Is(err, toolroot.ErrMissing) || !strings.Contains(err.Error(), "--toolchain "+string(c)) || !strings.Contains(err.Error(), "make deps") {
			t.Errorf("%s without a root: %v, want ErrMissing naming the flag and make deps", c, err)
		}
	}
}

// The root's toolchains for real, where the machine has the root: version
// lines from inside it, and the cross prefix or LLVM= the arch needs.
func TestResolveRootToolchain(t *testing.T) {
	out, err := exec.Command("bash", "../../scripts/toolroot.sh", "path").Output()
	if err != nil {
		t.Skip(err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := toolroot.Open(dir); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath(toolroot.Bwrap); err != nil {
		t.Skip(err)
	}
	tests := []struct {
		c            Compiler
		arch         string
		cross, llvm  string
		cc, versionS string
	}{
		{GCC14, "x86_64", "", "", "gcc-14", "14."},
		{GCC14, "arm64", "aarch64-linux-gnu-", "", "aarch64-linux-gnu-gcc-14", "14."},
		{GCC14, "riscv64", "riscv64-linux-gnu-", "", "riscv64-linux-gnu-gcc-14", "14."},
		{Clang21, "riscv64", "", "-21", "clang-21", "clang version 21"},
	}
	for _, tt := range tests {
		a, _ := arch.Lookup(tt.arch)
		tc, err := ResolveToolchain(t.Context(), a, tt.c, dir)
		if err != nil {
			t.Errorf("%s %s: %v", tt.c, tt.arch, err)
			continue
		}
		if tc.CrossCompile != tt.cross || tc.LLVM != tt.llvm || !strings.HasSuffix(tc.CC, tt.cc) || !strings.Contains(tc.Version, tt.versionS) || !strings.HasSuffix(tc.Version, rootMark) || tc.Root.Dir != dir {
			t.Errorf("%s %s = %+v", tt.c, tt.arch, tc)
		}
	}
}

// A build in the root sees the tree, the cache, the fragments and /tmp at
// their own paths, and a patched file over its place in the tree.
func TestBuilderMounts(t *testing.T) {
	b := &builder{
		req: Request{Source: Source{Dir: "/src/linux"}, CacheDir: "/var/cache/fth", KconfigDir: "/repo/kconfigs"},
		out: "/var/cache/fth/kernels/x86_64-k/build",
		ov:  overlay{dir: "/var/cache/fth/kernels/x86_64-k/patched", files: []string{"kernel/trace/ftrace.c"}},
	}
	ms := b.mounts()
	for _, want := range []toolroot.Mount{
		{Path: "/src/linux", Mode: toolroot.RW},
		{Path: "/var/cache/fth", Mode: toolroot.RW},
		{Path: "/repo/kconfigs", Mode: toolroot.RO},
		{Path: "/src/linux/kernel/trace/ftrace.c", Src: "/var/cache/fth/kernels/x86_64-k/patched/kernel/trace/ftrace.c", Mode: toolroot.RO},
	} {
		if !slices.Contains(ms, want) {
			t.Errorf("mounts %+v lack %+v", ms, want)
		}
	}
}

// The one entry resolves default and unset itself, and records the choice
// and the compiler it is on the arch (result.json's request.toolchain and
// kernel.compiler); ppc64le's default is gcc-14, so without a root it
// fails naming that choice.
func TestResolveToolchainNamesChoiceAndCompiler(t *testing.T) {
	noRoot := filepath.Join(t.TempDir(), "none")
	tests := []struct {
		arch         string
		c            Compiler
		choice, comp Compiler
		errHas       string
	}{
		{"x86_64", "", CompilerHost, GCC12, ""},
		{"x86_64", CompilerDefault, CompilerHost, GCC12, ""},
		{"x86_64", CompilerHost, CompilerHost, GCC12, ""},
		{"x86_64", GCC12, GCC12, GCC12, ""},
		{"riscv64", CompilerDefault, CompilerHost, Clang19, ""},
		{"riscv64", Clang19, Clang19, Clang19, ""},
		{"ppc64le", CompilerDefault, "", "", "--toolchain gcc-14"},
		{"x86_64", Clang21, "", "", "--toolchain clang-21"},
	}
	for _, tt := range tests {
		t.Run(tt.arch+"/"+string(orUnset(tt.c)), func(t *testing.T) {
			a, _ := arch.Lookup(tt.arch)
			tc, err := ResolveToolchain(t.Context(), a, tt.c, noRoot)
			if tt.errHas != "" {
				if !errors.Is(err, toolroot.ErrMissing) || !strings.Contains(err.Error(), tt.errHas) || !strings.Contains(err.Error(), "make deps") {
					t.Errorf("err = %v, want ErrMissing naming %s and make deps", err, tt.errHas)
				}
				return
			}
			if errors.Is(err, ErrMissingTool) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.Choice != tt.choice || tc.Compiler != tt.comp || tc.Arch != a.Name || tc.InRoot() {
				t.Errorf("= choice %q, compiler %q, arch %s, in root %v; want %q, %q, %s, false", tc.Choice, tc.Compiler, tc.Arch, tc.InRoot(), tt.choice, tt.comp, a.Name)
			}
			if err := tc.checkFor(a.Name); err != nil {
				t.Errorf("checkFor its own arch: %v", err)
			}
		})
	}
}

func orUnset(c Compiler) Compiler {
	if c == "" {
		return "unset"
	}
	return c
}

// make hears the cross prefix always (empty clears nothing: the
// environment is clean), and LLVM= only for clang.
func TestMakeEnv(t *testing.T) {
	tests := []struct {
		tc   Toolchain
		want []string
	}{
		{Toolchain{}, []string{"CROSS_COMPILE="}},
		{Toolchain{CrossCompile: "aarch64-linux-gnu-"}, []string{"CROSS_COMPILE=aarch64-linux-gnu-"}},
		{Toolchain{LLVM: "-19"}, []string{"CROSS_COMPILE=", "LLVM=-19"}},
	}
	for _, tt := range tests {
		if got := tt.tc.makeEnv(); !slices.Equal(got, tt.want) {
			t.Errorf("%+v.makeEnv() = %q, want %q", tt.tc, got, tt.want)
		}
	}
}

// A build refuses a toolchain nobody resolved, or one resolved for
// another arch, before make runs.
func TestToolchainCheckFor(t *testing.T) {
	tests := []struct {
		tc   Toolchain
		a    arch.Name
		fail bool
	}{
		{Toolchain{Arch: arch.X86_64, CC: "gcc"}, arch.X86_64, false},
		{Toolchain{}, arch.X86_64, true},
		{Toolchain{Arch: arch.X86_64}, arch.X86_64, true},
		{Toolchain{Arch: arch.X86_64, CC: "gcc"}, arch.ARM64, true},
	}
	for _, tt := range tests {
		err := tt.tc.checkFor(tt.a)
		if (err != nil) != tt.fail || (err != nil && !strings.Contains(err.Error(), "ResolveToolchain")) {
			t.Errorf("%+v.checkFor(%s) = %v, want failure %v", tt.tc, tt.a, err, tt.fail)
		}
	}
}

// Build refuses a request whose toolchain was not resolved, before it
// reads a fragment.
func TestBuildNeedsAResolvedToolchain(t *testing.T) {
	req := Request{Arch: mustArch(t, "x86_64"), KconfigDir: filepath.Join(t.TempDir(), "none"), Fragments: []string{"base"}}
	_, err := Build(t.Context(), nil, req)
	if err == nil || !strings.Contains(err.Error(), "ResolveToolchain") {
		t.Errorf("Build without a toolchain = %v, want an error naming ResolveToolchain", err)
	}
}
