package kbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
)

func writeGates(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, GatesFile), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A gated setting is left out before its series and kept from it on; the
// effective text comments exactly its line out, and the cache key changes
// only for the version that leaves something out.
func TestForVersion(t *testing.T) {
	f, err := ParseFragment("ftrace/x", []byte("# why\nCONFIG_A=y\nCONFIG_FPROBE=y\n"))
	if err != nil {
		t.Fatal(err)
	}
	gates, err := LoadGates(writeGates(t, "# comment\nFPROBE 6.14 fprobe needs WITH_REGS before\n"))
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Identity: "tree"}
	tc := Toolchain{Version: "gcc 12"}
	base := Key(src, arch.X86_64, []Fragment{f}, tc)
	for _, tt := range []struct {
		version string
		left    bool
	}{
		{"6.12.117", true},
		{"6.13", true},
		{"6.14.0", false},
		{"7.3.4", false},
		{"unreadable", false},
	} {
		got, left := ForVersion([]Fragment{f}, gates, tt.version)
		if (len(left) == 1) != tt.left || len(got[0].Settings)+len(left) != 2 {
			t.Errorf("%s: settings %v, left %v", tt.version, got[0].Settings, left)
			continue
		}
		k := Key(src, arch.X86_64, got, tc)
		if tt.left {
			if want := "CONFIG_FPROBE=y (ftrace/x:3) is asked only from Linux 6.14 (versions:2: fprobe needs WITH_REGS before)"; left[0].String() != want {
				t.Errorf("%s: %q, want %q", tt.version, left[0].String(), want)
			}
			if text := string(got[0].EffectiveText()); !strings.Contains(text, "\nCONFIG_A=y\n# (not asked") || !strings.HasSuffix(text, ") CONFIG_FPROBE=y\n") {
				t.Errorf("%s: effective text %q", tt.version, text)
			}
			if k == base {
				t.Errorf("%s: the key did not change with a setting left out", tt.version)
			}
		} else if k != base {
			t.Errorf("%s: nothing left out, yet the key changed", tt.version)
		}
	}
}

// A gate scoped to one fragment leaves only that fragment's setting out.
func TestForVersionScoped(t *testing.T) {
	var frags []Fragment
	for _, name := range []string{"arch/x86_64", "arch/arm64"} {
		f, err := ParseFragment(name, []byte("CONFIG_LIVEPATCH=y\n"))
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f)
	}
	gates, err := LoadGates(writeGates(t, "LIVEPATCH@arch/arm64 6.16 arm64 has no HAVE_LIVEPATCH before\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(gates) != 1 || gates[0].Fragment != "arch/arm64" || gates[0].From != "6.16" {
		t.Fatalf("gates = %+v", gates)
	}
	got, left := ForVersion(frags, gates, "6.12.117")
	if len(left) != 1 || left[0].Origin != "arch/arm64:1" || len(got[0].Settings) != 1 || len(got[1].Settings) != 0 {
		t.Errorf("6.12: left %v, x86_64 %v, arm64 %v", left, got[0].Settings, got[1].Settings)
	}
	if _, left := ForVersion(frags, gates, "7.3.4"); len(left) != 0 {
		t.Errorf("7.3: left %v", left)
	}
}

func TestLoadGatesErrors(t *testing.T) {
	if g, err := LoadGates(t.TempDir()); err != nil || g != nil {
		t.Errorf("no file: %v, %v; want no gates", g, err)
	}
	for _, text := range []string{"FPROBE 6.14\n", "FPROBE six reason\n", "CONFIG_FPROBE 6.14 reason\n", "FPROBE@ 6.14 reason\n", "FPROBE@Arch/X 6.14 reason\n"} {
		if _, err := LoadGates(writeGates(t, text)); err == nil || !strings.Contains(err.Error(), "versions:1") {
			t.Errorf("%q: err = %v, want one naming versions:1", text, err)
		}
	}
}

// Every shipped gate is for a symbol some shipped fragment sets: a gate for
// nothing would hide a typo.
func TestShippedGates(t *testing.T) {
	dir := "../../kconfigs"
	gates, err := LoadGates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(gates) == 0 {
		t.Fatal("kconfigs/versions has no gates")
	}
	set, setIn := map[string]bool{}, map[string]bool{}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".md") || filepath.Base(path) == GatesFile {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := ParseFragment(rel, text)
		if err != nil {
			return err
		}
		for _, s := range f.Settings {
			set[s.Symbol] = true
			setIn[rel+" "+s.Symbol] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gates {
		if !set[g.Symbol] || (g.Fragment != "" && !setIn[g.Fragment+" "+g.Symbol]) {
			t.Errorf("%s: no fragment sets CONFIG_%s (scope %q)", g.Origin, g.Symbol, g.Fragment)
		}
	}
}
