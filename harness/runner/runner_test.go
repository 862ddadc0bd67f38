package runner

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/toolroot"
)

func TestVariantName(t *testing.T) {
	tests := []struct {
		frags   []string
		preempt string
		want    string
	}{
		{[]string{"base", "arch/x86_64", "ftrace/direct-calls", "preempt/full"}, "full", "direct-calls-full"},
		{[]string{"base", "arch/x86_64", "ftrace/direct-calls", "preempt/full"}, "lazy", "direct-calls-full-boot-lazy"},
		{[]string{"base", "arch/x86_64"}, "", "base"},
		{[]string{"base", "arch/arm64", "ftrace/no-call-ops"}, "full", "no-call-ops-boot-full"},
	}
	for _, tt := range tests {
		if got := VariantName(tt.frags, tt.preempt); got != tt.want {
			t.Errorf("VariantName(%v, %q) = %q, want %q", tt.frags, tt.preempt, got, tt.want)
		}
	}
}

// The toolchain is resolved before the kernel's source is opened: a
// choice whose root is missing fails naming the flag and make deps, not
// the (here missing) tree.
func TestBuildKernelResolvesTheToolchainFirst(t *testing.T) {
	tmp := t.TempDir()
	e := &Env{
		KernelSrc: filepath.Join(tmp, "no-tree"), KconfigDir: filepath.Join(tmp, "no-kconfigs"), CacheDir: tmp,
		ToolRoot: filepath.Join(tmp, "no-root"), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	a, _ := arch.Lookup("x86_64")
	for _, c := range []kbuild.Compiler{kbuild.GCC14, kbuild.Clang21} {
		_, _, err := e.BuildKernel(t.Context(), a, c, []string{"base"})
		if !errors.Is(err, toolroot.ErrMissing) || !strings.Contains(err.Error(), "--toolchain "+string(c)) || !strings.Contains(err.Error(), "make deps") {
			t.Errorf("BuildKernel with %s and no root = %v, want ErrMissing naming --toolchain %s and make deps", c, err, c)
		}
	}
}
