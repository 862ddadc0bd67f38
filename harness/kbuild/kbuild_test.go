package kbuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
)

func TestParseFragment(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []Setting
		wantErr string
	}{
		{
			name: "all forms",
			text: "# comment\n\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=21\nCONFIG_D=\"x y\"\nCONFIG_E=0x10\nCONFIG_F=m\n",
			want: []Setting{{"A", "y", "f:3"}, {"B", "n", "f:4"}, {"C", "21", "f:5"}, {"D", `"x y"`, "f:6"}, {"E", "0x10", "f:7"}, {"F", "m", "f:8"}},
		},
		{name: "missing prefix", text: "FTRACE=y\n", wantErr: `f:1: "FTRACE=y" is not a CONFIG_<SYMBOL>=<value>`},
		{name: "bad value", text: "CONFIG_A=yes\n", wantErr: `f:1: CONFIG_A has value "yes"`},
		{name: "unquoted string", text: "CONFIG_A=hello world\n", wantErr: `CONFIG_A has value "hello world"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFragment("f", []byte(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrBadFragment) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Settings) != len(tt.want) {
				t.Fatalf("got %v, want %v", f.Settings, tt.want)
			}
			for i := range tt.want {
				if f.Settings[i] != tt.want[i] {
					t.Errorf("setting %d = %v, want %v", i, f.Settings[i], tt.want[i])
				}
			}
		})
	}
}

func TestMergeLaterWins(t *testing.T) {
	a, _ := ParseFragment("a", []byte("CONFIG_X=y\nCONFIG_Y=y\n"))
	b, _ := ParseFragment("b", []byte("# CONFIG_X is not set\nCONFIG_Z=y\n"))
	got := Merge([]Fragment{a, b})
	want := []Setting{{"X", "n", "b:1"}, {"Y", "y", "a:2"}, {"Z", "y", "b:2"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// The shipped fragments must parse, and the repo must have what the default
// x86_64 variant names.
func TestShippedFragmentsParse(t *testing.T) {
	dir := "../../kconfigs"
	frags, err := LoadFragments(dir, []string{"base", "arch/x86_64", "ftrace/direct-calls", "preempt/full"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range Merge(frags) {
		got[s.Symbol] = s.Value
	}
	// The floor: these must be asked for, and PANIC_ON_OOPS off.
	for _, sym := range []string{"DEBUG_INFO_BTF", "BPF_JIT", "FUNCTION_TRACER", "FUNCTION_GRAPH_TRACER", "KPROBES", "MODULES", "SOFTLOCKUP_DETECTOR", "HARDLOCKUP_DETECTOR", "DETECT_HUNG_TASK", "PREEMPT_DYNAMIC", "DYNAMIC_FTRACE_WITH_DIRECT_CALLS"} {
		if got[sym] != "y" {
			t.Errorf("CONFIG_%s = %q, want y", sym, got[sym])
		}
	}
	if got["PANIC_ON_OOPS"] != "n" {
		t.Errorf("CONFIG_PANIC_ON_OOPS = %q, want n: the harness collects the oops", got["PANIC_ON_OOPS"])
	}
	if _, err := LoadFragments(dir, []string{"ftrace/nope"}); err == nil || !strings.Contains(err.Error(), "available:") {
		t.Errorf("missing fragment: err = %v, want a list of what is available", err)
	}
}

func testIndex(t *testing.T) Index {
	t.Helper()
	idx, err := IndexTree("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestPrecheck(t *testing.T) {
	idx := testIndex(t)
	tests := []struct {
		name    string
		req     []Setting
		wantErr string
	}{
		{name: "fine", req: []Setting{{"FUNCTION_TRACER", "y", "f:1"}, {"RCU_CPU_STALL_TIMEOUT", "21", "f:2"}}},
		{name: "impossible symbol", req: []Setting{{"TRACEFS", "y", "f:1"}}, wantErr: "CONFIG_TRACEFS: asked y (f:1), got n: not available on this kernel version"},
		{name: "int given as bool", req: []Setting{{"BOOTPARAM_SOFTLOCKUP_PANIC", "n", "f:3"}}, wantErr: "is an int in this kernel"},
		{name: "bool as module", req: []Setting{{"FUNCTION_TRACER", "m", "f:1"}}, wantErr: "cannot be a module"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Precheck(tt.req, idx)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrConfigMismatch) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// Verify against a real x86_64 7.3 .config produced by merge_config.sh.
func TestVerifyRealConfig(t *testing.T) {
	text, err := os.ReadFile("testdata/x86_64-7.3.config")
	if err != nil {
		t.Fatal(err)
	}
	final := ParseConfig(text)
	idx := testIndex(t)
	if err := Verify([]Setting{{"DYNAMIC_FTRACE_WITH_DIRECT_CALLS", "y", "f:1"}, {"PANIC_ON_OOPS", "n", "f:2"}}, final, idx); err != nil {
		t.Fatalf("settings present in the config: %v", err)
	}
	tests := []struct {
		name string
		req  Setting
		want string
	}{
		// x86 has no CALL_OPS: the symbol exists but its dependency is absent.
		{"call ops on x86", Setting{"DYNAMIC_FTRACE_WITH_CALL_OPS", "y", "f:1"}, "a missing dependency: DYNAMIC_FTRACE_WITH_CALL_OPS (kernel/trace/Kconfig:334) depends on HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS"},
		{"unknown", Setting{"PROC_SYSCTL", "y", "f:1"}, "not available on this kernel version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify([]Setting{tt.req}, final, idx)
			var me *MismatchError
			if !errors.As(err, &me) || len(me.Mismatches) != 1 {
				t.Fatalf("err = %v, want one mismatch", err)
			}
			if !strings.Contains(me.Mismatches[0].Reason, tt.want) {
				t.Errorf("reason = %q, want %q", me.Mismatches[0].Reason, tt.want)
			}
			if me.Mismatches[0].Got != "n" {
				t.Errorf("got = %q, want n", me.Mismatches[0].Got)
			}
		})
	}
}

func TestKeyChangesWithInputs(t *testing.T) {
	f1, _ := ParseFragment("a", []byte("CONFIG_X=y\n"))
	f2, _ := ParseFragment("a", []byte("CONFIG_X=n\n"))
	src := Source{Identity: "tree1"}
	tc := Toolchain{Version: "gcc 12"}
	base := Key(src, arch.X86_64, []Fragment{f1}, tc)
	if base != Key(src, arch.X86_64, []Fragment{f1}, tc) {
		t.Fatal("key is not deterministic")
	}
	variants := map[string]string{
		"fragment text": Key(src, arch.X86_64, []Fragment{f2}, tc),
		"source":        Key(Source{Identity: "tree2"}, arch.X86_64, []Fragment{f1}, tc),
		"arch":          Key(src, arch.RISCV64, []Fragment{f1}, tc),
		"toolchain":     Key(src, arch.X86_64, []Fragment{f1}, Toolchain{Version: "gcc 14"}),
		"order":         Key(src, arch.X86_64, []Fragment{f1, f2}, tc),
	}
	for what, k := range variants {
		if k == base {
			t.Errorf("changing the %s did not change the key", what)
		}
	}
	if Key(src, arch.X86_64, []Fragment{f1, f2}, tc) == Key(src, arch.X86_64, []Fragment{f2, f1}, tc) {
		t.Error("fragment order matters (later wins) but did not change the key")
	}
}

func TestTreeIdentitySeesEdits(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Makefile"), []byte("VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\n"), 0o644)
	s1, err := OpenSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Version != "7.3.4" {
		t.Errorf("version = %q", s1.Version)
	}
	os.WriteFile(filepath.Join(dir, "new.c"), []byte("int x;"), 0o644)
	s2, _ := OpenSource(dir)
	if s1.Identity == s2.Identity {
		t.Error("adding a file did not change the tree identity")
	}
	if _, err := OpenSource(t.TempDir()); !errors.Is(err, ErrNotKernelTree) {
		t.Errorf("empty dir: err = %v, want ErrNotKernelTree", err)
	}
}

// A half-written entry (no manifest) and a corrupt one (image changed) must
// both be rejected, never trusted.
func TestManifestIntegrity(t *testing.T) {
	entry := t.TempDir()
	if _, err := loadManifest(entry); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no manifest: err = %v, want ErrNotExist", err)
	}
	img := filepath.Join(entry, "bzImage")
	vml := filepath.Join(entry, "vmlinux")
	os.WriteFile(img, []byte("image"), 0o644)
	os.WriteFile(vml, []byte("vmlinux!"), 0o644)
	sum, _ := fileSHA256(img)
	k := Kernel{Image: img, ImageSHA256: sum, Vmlinux: vml, VmlinuxSize: 8, Release: "7.3.4"}
	if err := writeManifest(entry, k); err != nil {
		t.Fatal(err)
	}
	if got, err := loadManifest(entry); err != nil || got.Release != "7.3.4" {
		t.Fatalf("intact entry: %v, %v", got, err)
	}
	os.WriteFile(img, []byte("imagX"), 0o644)
	if _, err := loadManifest(entry); !errors.Is(err, ErrCorruptCache) {
		t.Errorf("changed image: err = %v, want ErrCorruptCache", err)
	}
	os.WriteFile(img, []byte("image"), 0o644)
	os.WriteFile(vml, []byte("vml"), 0o644)
	if _, err := loadManifest(entry); !errors.Is(err, ErrCorruptCache) {
		t.Errorf("truncated vmlinux: err = %v, want ErrCorruptCache", err)
	}
	os.WriteFile(filepath.Join(entry, manifestName), []byte("{"), 0o644)
	if _, err := loadManifest(entry); !errors.Is(err, ErrCorruptCache) {
		t.Errorf("garbled manifest: err = %v, want ErrCorruptCache", err)
	}
}

func TestObserveRealConfig(t *testing.T) {
	text, err := os.ReadFile("testdata/x86_64-7.3.config")
	if err != nil {
		t.Fatal(err)
	}
	got := Observe(ParseConfig(text))
	for sym, want := range map[string]string{
		"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS": "y",
		"CONFIG_PREEMPT_DYNAMIC":                  "y",
		"CONFIG_CC_IS_GCC":                        "y",
	} {
		if got[sym] != want {
			t.Errorf("%s = %q, want %q", sym, got[sym], want)
		}
	}
	if _, ok := got["CONFIG_SERIAL_8250"]; ok {
		t.Error("unrelated symbols are recorded")
	}
}

// A def_bool whose dependencies are unmet is absent from .config; asked "n",
// it is verified and recorded as "n", not "".
func TestVerifiedAbsentIsN(t *testing.T) {
	text, _ := os.ReadFile("testdata/x86_64-7.3.config")
	final := ParseConfig(text)
	want := []Setting{{"DYNAMIC_FTRACE_WITH_CALL_OPS", "n", "f:1"}}
	if err := Verify(want, final, testIndex(t)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got := verified(want, final)["CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS"]; got != "n" {
		t.Errorf("verified = %q, want n", got)
	}
}
