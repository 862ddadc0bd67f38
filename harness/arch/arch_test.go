package arch

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results/regs"
)

// Every row must be complete: a missing field shows up as a confusing QEMU or
// make error much later, so catch it here.
func TestTableComplete(t *testing.T) {
	for _, a := range All() {
		t.Run(string(a.Name), func(t *testing.T) {
			v := reflect.ValueOf(a)
			for i := range v.NumField() {
				f := v.Type().Field(i)
				switch f.Name {
				case "Cmdline", "KVMCapable", "LLVM", "BoardCmdline", "ToolchainNote", "DefaultToolchain", "DefaultQEMU", "NoRace":
					continue // legitimately empty or false
				}
				if v.Field(i).IsZero() {
					t.Errorf("field %s is empty", f.Name)
				}
			}
			if !a.Has(DirectCalls) {
				t.Errorf("%s: every supported arch has direct calls", a.Name)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		in   string
		want Name
		err  error
	}{
		{"x86_64", X86_64, nil},
		{"amd64", X86_64, nil},
		{"riscv64", RISCV64, nil},
		{"arm64", ARM64, nil},
		{"ppc64le", PPC64LE, nil},
		{"s390x", "", ErrUnknown},
		{"", "", ErrUnknown},
	}
	for _, tt := range tests {
		got, err := Lookup(tt.in)
		if !errors.Is(err, tt.err) {
			t.Errorf("Lookup(%q) error = %v, want %v", tt.in, err, tt.err)
		}
		if got.Name != tt.want {
			t.Errorf("Lookup(%q) = %q, want %q", tt.in, got.Name, tt.want)
		}
	}
}

func TestX86HasNoCallOps(t *testing.T) {
	a, err := Lookup("x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if a.Has(CallOps) {
		t.Error("x86_64 must not claim CALL_OPS: Linux has none there")
	}
}

func TestByUname(t *testing.T) {
	for m, want := range map[string]Name{"x86_64": X86_64, "aarch64": ARM64, "riscv64": RISCV64, "ppc64le": PPC64LE} {
		a, err := ByUname(m)
		if err != nil || a.Name != want {
			t.Errorf("ByUname(%q) = %s, %v; want %s", m, a.Name, err, want)
		}
	}
	if _, err := ByUname("s390x"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "aarch64") {
		t.Errorf("ByUname(s390x) err = %v, want ErrUnknown listing the known ones", err)
	}
}

// A new arch row is one row plus its data; this names what a row still
// lacks, each with where it goes: the kconfig fragment, the golden QEMU
// command line (harness/machine/qemu: go test -run TestArgsGoldenEveryArch
// -update), real console logs for the crash parser's corpus (under the
// harness's name or the kernel's ARCH), its register format in
// results/regs (every console reader's register patterns are built from
// it), and the Debian packages scripts/deps.sh installs.
func TestEveryRowHasItsData(t *testing.T) {
	deps, err := os.ReadFile("../../scripts/deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range All() {
		t.Run(string(a.Name), func(t *testing.T) {
			if _, err := os.Stat(filepath.Join("../../kconfigs", a.Fragment())); err != nil {
				t.Errorf("no kconfig fragment: %v", err)
			}
			if _, err := os.Stat(filepath.Join("../machine/qemu/testdata/args", string(a.Name)+".golden")); err != nil {
				t.Errorf("no golden QEMU command line: %v (go test ./harness/machine/qemu -run TestArgsGoldenEveryArch -update)", err)
			}
			fixtures := 0
			for _, dir := range []string{string(a.Name), a.KernelArch} {
				m, _ := filepath.Glob(filepath.Join("../../results/console/testdata", dir, "*"))
				fixtures += len(m)
			}
			if fixtures == 0 {
				t.Errorf("no console log of this arch in results/console/testdata/{%s,%s}: its crash formats are untested", a.Name, a.KernelArch)
			}
			if f, err := regs.Lookup(a.RegFormat); err != nil {
				t.Errorf("no register format: %v (add a Format to results/regs, name it in RegFormat)", err)
			} else if err := f.Bootable(); err != nil {
				t.Errorf("register format incomplete: %v", err)
			}
			pkgs := []string{a.QEMUPackage}
			if host, _ := HostName(runtime.GOARCH); host != a.Name {
				pkgs = append(pkgs, a.CrossPackage) // the host's own gcc needs none
			}
			for _, pkg := range pkgs {
				if !strings.Contains(string(deps), pkg) {
					t.Errorf("scripts/deps.sh does not install %s", pkg)
				}
			}
			if a.LLVM != "" && !strings.Contains(string(deps), "clang"+a.LLVM) {
				t.Errorf("scripts/deps.sh does not install clang%s", a.LLVM)
			}
		})
	}
}

// HostName takes every spelling a row knows, and only those.
func TestHostNameFromTable(t *testing.T) {
	for in, want := range map[string]Name{"x86_64": X86_64, "amd64": X86_64, "aarch64": ARM64, "arm64": ARM64, "riscv64": RISCV64, "ppc64le": PPC64LE} {
		if got, ok := HostName(in); !ok || got != want {
			t.Errorf("HostName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := HostName("s390x"); ok {
		t.Error("HostName(s390x) found a row")
	}
}
