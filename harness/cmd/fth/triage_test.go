package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{name: "one log has no log field", logs: []string{oops}, wantCount: 3},
		{name: "several logs name theirs", logs: []string{oops, clean, oops}, wantCount: 6, wantLog: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := run(context.Background(), append([]string{"triage", "--json"}, tt.logs...), &out, &errOut); err != nil {
				t.Fatalf("triage: %v\n%s", err, errOut.String())
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
				for _, k := range []string{"title", "kind", "first_line", "last_line"} {
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
			if tt.wantLog && (got[0]["log"] != oops || got[3]["log"] != oops) {
				t.Errorf("log fields = %v, %v; want %s", got[0]["log"], got[3]["log"], oops)
			}
		})
	}
}

func TestTriageGroupsAcrossLogs(t *testing.T) {
	oops := corpusLog(t, t.TempDir(), "int3-oops-mttcg-attach-storm-7.3.4")
	again := corpusLog(t, t.TempDir(), "int3-oops-mttcg-attach-storm-7.3.4")
	clean := corpusLog(t, t.TempDir(), "clean-boot-fth-7.3.4-attach-200")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"triage", oops, clean, again}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Oops: int3 in up_read (oops): 4 times in 2 of 3 logs\n  " + oops + ": lines 248-277, 278-292\n  " + again + ": lines 248-277, 278-292\n    __do_sys_newuname\n    do_syscall_64\n",
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
	if err := run(context.Background(), []string{"triage", "--vmlinux", vmlinux, oops}, &out, &out); err != nil {
		t.Fatal(err)
	}
	want := "    do_syscall_x64 arch/x86/entry/syscall_64.c:64 [inline]\n    do_syscall_64+0x68/0x320 arch/x86/entry/syscall_64.c:87\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"triage", "--json", "--vmlinux", vmlinux, oops}, &out, &out); err != nil {
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
// int3 fixture (up_read is 0xc0 bytes to the next symbol there).
func fixtureVmlinuxPath(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("FTH_CACHE")
	if cache == "" {
		cache = "/var/cache/fth"
	}
	paths, _ := filepath.Glob(filepath.Join(cache, "kernels", "x86_64-*", "build", "vmlinux"))
	for _, p := range paths {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"triage", "--json", "--vmlinux", p, corpusLog(t, t.TempDir(), "int3-oops-mttcg-attach-storm-7.3.4")}, &out, &out); err != nil {
			continue
		}
		if strings.Contains(out.String(), `"file": "kernel/locking/rwsem.c"`) {
			return p
		}
	}
	t.Skipf("no x86_64 vmlinux of the int3 fixture's build under %s/kernels: make test (e2e) or bin/fth build --arch x86_64 builds it", cache)
	return ""
}
