package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results/symbolize"
)

// corpusLog writes the console log of a results/console corpus file (without
// its TITLE/KIND header) to dir and returns its path.
func corpusLog(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "results", "console", "testdata", "x86_64", name))
	if err != nil {
		t.Fatal(err)
	}
	// The header ends at the first blank line; a clean log's is empty.
	_, log, ok := bytes.Cut(append([]byte("\n"), b...), []byte("\n\n"))
	if !ok {
		t.Fatalf("%s: header not ended by a blank line", name)
	}
	p := filepath.Join(dir, name+".log")
	if err := os.WriteFile(p, log, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTriageJSONContract(t *testing.T) {
	dir := t.TempDir()
	oops := corpusLog(t, dir, "int3-oops-mttcg-attach-storm-7.3.4")
	clean := corpusLog(t, dir, "clean-boot-fth-7.3.4-attach-200")
	tests := []struct {
		name      string
		logs      []string
		wantCount int
		wantLog   bool
	}{
		{name: "clean log is an empty array", logs: []string{clean}},
		{name: "one log has no log field", logs: []string{oops}, wantCount: 2},
		{name: "several logs name theirs", logs: []string{oops, clean, oops}, wantCount: 4, wantLog: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), append([]string{"triage", "--json"}, tt.logs...), &out, &errOut)
			if want := tt.wantCount > 0; errors.Is(err, errCellsFailed) != want || (err != nil && !want) {
				t.Fatalf("triage: %v, want a kernel-failure error (exit 1) = %v\n%s", err, want, errOut.String())
			}
			if tt.wantCount == 0 && strings.TrimSpace(out.String()) != "[]" {
				t.Fatalf("clean output = %q, want []", out.String())
			}
			var got []map[string]any
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("not a JSON array: %v\n%s", err, out.String())
			}
			if len(got) != tt.wantCount {
				t.Fatalf("%d findings, want %d", len(got), tt.wantCount)
			}
			for i, f := range got {
				for _, k := range []string{"title", "kind", "count", "first_line", "last_line", "report"} {
					if _, ok := f[k]; !ok {
						t.Errorf("finding %d has no %q: %v", i, k, f)
					}
				}
				if _, ok := f["log"]; ok != tt.wantLog {
					t.Errorf("finding %d: log field present = %v, want %v", i, ok, tt.wantLog)
				}
				if _, ok := f["frames"]; ok {
					t.Errorf("finding %d has frames without --vmlinux", i)
				}
			}
			if tt.wantLog && (got[0]["log"] != oops || got[2]["log"] != oops) {
				t.Errorf("log fields = %v, %v; want %s", got[0]["log"], got[2]["log"], oops)
			}
			if tt.wantCount > 0 {
				// Both vCPUs hit the int3: one finding, two reports.
				f := got[0]
				if f["title"] != "Oops: int3 in up_read" || f["count"] != 2.0 || f["guilty_frame"] != "up_read" || f["cpu"] != 1.0 || f["pid"] != 54.0 || f["comm"] != "uinit" || f["taint"] != "not tainted" {
					t.Errorf("first finding = %v", f)
				}
			}
		})
	}
}

func TestTriageGroupsAcrossLogs(t *testing.T) {
	oops := corpusLog(t, t.TempDir(), "int3-oops-mttcg-attach-storm-7.3.4")
	again := corpusLog(t, t.TempDir(), "int3-oops-mttcg-attach-storm-7.3.4")
	clean := corpusLog(t, t.TempDir(), "clean-boot-fth-7.3.4-attach-200")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"triage", oops, clean, again}, &out, &out); !errors.Is(err, errCellsFailed) {
		t.Fatalf("triage found reports, err = %v, want exit 1 (errCellsFailed)", err)
	}
	for _, want := range []string{
		"Oops: int3 in up_read (oops): 4 times in 2 of 3 logs\n  first: CPU 1, task uinit[54], taint not tainted\n  " + oops + ": lines 248-277\n  " + again + ": lines 248-277\n    __do_sys_newuname\n    do_syscall_64\n",
		"kernel panic: Fatal exception in interrupt (panic): 2 times in 2 of 3 logs\n",
		"no kernel reports in: " + clean + "\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTriageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no log", []string{"triage"}, "usage"},
		{"missing log", []string{"triage", "/nonexistent/console.log"}, "/nonexistent/console.log"},
		{"missing vmlinux", []string{"triage", "--vmlinux", "/nonexistent/vmlinux", "x.log"}, "/nonexistent/vmlinux"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, &out, &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// With the vmlinux that printed the fixture, triage shows file:line and the
// inlined syscall dispatch. The kernel exists once `make test` (or `fth
// build`) has built it; before that the test skips.
func TestTriageVmlinux_SkipsUntilKernelBuilt(t *testing.T) {
	vmlinux := fixtureVmlinuxPath(t)
	oops := corpusLog(t, t.TempDir(), "int3-oops-mttcg-attach-storm-7.3.4")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"triage", "--vmlinux", vmlinux, oops}, &out, &out); !errors.Is(err, errCellsFailed) {
		t.Fatal(err)
	}
	want := "    do_syscall_x64 arch/x86/entry/syscall_64.c:64 [inline]\n    do_syscall_64+0x68/0x320 arch/x86/entry/syscall_64.c:87\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"triage", "--json", "--vmlinux", vmlinux, oops}, &out, &out); !errors.Is(err, errCellsFailed) {
		t.Fatal(err)
	}
	var got []triageFinding
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got[0].Frames) == 0 || got[0].Frames[0].Locations[0].File != "kernel/locking/rwsem.c" {
		t.Errorf("first finding's frames = %+v", got)
	}
}

// fixtureVmlinuxPath finds the cached x86_64 vmlinux whose build printed the
// int3 fixture: the one triage accepts. Every x86_64 7.3.4 build of one
// compiler has the fixture's banner, so it is the frames' function sizes
// (up_read+0x1/0xc0) that tell the printing build from the others, which
// triage refuses (symbolize.ErrMismatch, exit 2).
func fixtureVmlinuxPath(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("FTH_CACHE")
	if cache == "" {
		cache = "/var/cache/fth"
	}
	oops := corpusLog(t, t.TempDir(), "int3-oops-mttcg-attach-storm-7.3.4")
	paths, _ := filepath.Glob(filepath.Join(cache, "kernels", "x86_64-*", "build", "vmlinux"))
	for _, p := range paths {
		// Reports found (exit 1) means triage accepted the vmlinux.
		err := run(context.Background(), []string{"triage", "--vmlinux", p, oops}, io.Discard, io.Discard)
		if errors.Is(err, errCellsFailed) {
			return p
		}
		if !errors.Is(err, symbolize.ErrMismatch) {
			t.Logf("%s: %v", p, err)
		}
	}
	t.Skipf("no x86_64 vmlinux of the int3 fixture's build under %s/kernels: make test (e2e) or bin/fth build --arch x86_64 builds it", cache)
	return ""
}

// A vmlinux of another build would give plausible, wrong file:line: triage
// refuses it with an error naming both kernels (exit 2), before printing.
func TestTriageRefusesAnotherKernelsVmlinux(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to link a stand-in vmlinux")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "v.c")
	banner := "Linux version 7.3.4 (someone@else) (gcc 13) #7 SMP PREEMPT_DYNAMIC 2026-01-01"
	if err := os.WriteFile(src, []byte("const char linux_banner[] = \""+banner+"\\n\";\nint main(void) { return linux_banner[0]; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vmlinux := filepath.Join(dir, "vmlinux")
	if b, err := exec.Command(cc, "-o", vmlinux, src).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v\n%s", err, b)
	}
	oops := corpusLog(t, dir, "int3-oops-mttcg-attach-storm-7.3.4")
	var out bytes.Buffer
	err = run(context.Background(), []string{"triage", oops, "--vmlinux", vmlinux}, &out, &out)
	if !errors.Is(err, symbolize.ErrMismatch) || exitCode(err, io.Discard) != exitError {
		t.Fatalf("err = %v, want a symbolize.ErrMismatch (exit 2)", err)
	}
	for _, want := range []string{vmlinux, banner, "Linux version 7.3.4 (fth@fth)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
