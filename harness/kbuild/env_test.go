package kbuild

import (
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
)

func mustArch(t *testing.T, name string) arch.Arch {
	t.Helper()
	a, err := arch.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCleanEnvDropsWhatKbuildWouldRead(t *testing.T) {
	in := []string{
		"PATH=/usr/bin", "HOME=/root", "TMPDIR=/tmp/x", "TERM=xterm",
		// `make test-arch=riscv64 -j2` leaves these in fth's environment.
		"MAKEFLAGS=j2 --jobserver-auth=3,4 -- test-arch=riscv64 ARCH=riscv64",
		"MAKELEVEL=1", "MFLAGS=-j2", "MAKEOVERRIDES=${-*-command-variables-*-}", "GNUMAKEFLAGS=--no-print-directory",
		"ARCH=riscv64", "CROSS_COMPILE=foo-", "LLVM=1", "CC=tcc", "O=/elsewhere", "KBUILD_OUTPUT=/elsewhere",
		"KCONFIG_CONFIG=other.config", "KCFLAGS=-O0", "LANG=de_DE.UTF-8", "LC_ALL=de_DE.UTF-8",
		"PATHOLOGICAL=1",
	}
	got := cleanEnv(in)
	want := []string{"PATH=/usr/bin", "HOME=/root", "TMPDIR=/tmp/x", "TERM=xterm", "LC_ALL=C"}
	if !slices.Equal(got, want) {
		t.Errorf("cleanEnv =\n%q\nwant\n%q", got, want)
	}
}

func TestBuilderEnvSetsItsOwnArch(t *testing.T) {
	t.Setenv("MAKEFLAGS", "ARCH=riscv64")
	t.Setenv("ARCH", "riscv64")
	b := &builder{req: Request{Arch: mustArch(t, "riscv64"), CacheDir: t.TempDir(), Toolchain: Toolchain{LLVM: "-19"}}}
	env := b.env()
	var arches []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "ARCH" {
			arches = append(arches, v)
		}
		if k == "MAKEFLAGS" {
			t.Errorf("MAKEFLAGS reached the kernel's make: %q", kv)
		}
	}
	if !slices.Equal(arches, []string{"riscv"}) {
		t.Errorf("ARCH values handed to make: %q, want only riscv", arches)
	}
}
