package kbuild

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const twoFilePatch = `Mutant: example
Why: a preamble patch(1) ignores

--- a/kernel/a.c
+++ b/kernel/a.c
@@ -1,3 +1,3 @@
 int a(void)
 {
-	return 1;
+	return 2;
--- a/lib/b.c	2026-01-01 00:00:00.000000000 +0000
+++ b/lib/b.c	2026-01-01 00:00:00.000000000 +0000
@@ -1 +1 @@
-int b;
+long b;
`

func TestPatchedFiles(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
		err        string
	}{
		{"two files, with timestamps and preamble", twoFilePatch, []string{"kernel/a.c", "lib/b.c"}, ""},
		{"git diff", "diff --git a/x.c b/x.c\nindex 1..2 100644\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n", []string{"x.c"}, ""},
		{"new file", "--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+a\n", nil, "creates or deletes"},
		{"deleted file", "--- a/old.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", nil, "creates or deletes"},
		{"escapes the tree", "--- a/../x.c\n+++ b/../x.c\n@@ -1 +1 @@\n-a\n+b\n", nil, "inside the tree"},
		{"not -p1", "--- x.c\n+++ x.c\n@@ -1 +1 @@\n-a\n+b\n", nil, "inside the tree"},
		{"not a diff", "just words\n", nil, "not a unified diff"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PatchedFiles([]byte(c.text))
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrBadPatch) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrBadPatch saying %q", err, c.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("PatchedFiles = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestOverlayPatchesACopyAndBindsIt(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	orig := map[string]string{"kernel/a.c": "int a(void)\n{\n\treturn 1;\n}\n", "lib/b.c": "int b;\n", "lib/c.c": "int c;\n"}
	src := writeTree(t, orig)
	ovDir := filepath.Join(t.TempDir(), "patched")
	ov, err := prepareOverlay(context.Background(), src, []Patch{{Name: "example", Text: []byte(twoFilePatch)}}, ovDir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ov.files, []string{"kernel/a.c", "lib/b.c"}) {
		t.Fatalf("overlay files = %v", ov.files)
	}
	if b, _ := os.ReadFile(filepath.Join(ovDir, "lib/b.c")); string(b) != "long b;\n" {
		t.Fatalf("patched copy = %q", b)
	}
	for name, text := range orig {
		if b, _ := os.ReadFile(filepath.Join(src, name)); string(b) != text {
			t.Fatalf("the tree's %s changed to %q", name, b)
		}
	}
	if _, err := os.Stat(filepath.Join(ovDir, "lib/c.c")); err == nil {
		t.Fatal("an untouched file was copied")
	}

	// Inside the wrapped command the tree shows the patched files at their
	// own paths; outside it, nothing changed.
	name, args := ov.wrap(src, "cat", []string{filepath.Join(src, "lib/b.c"), filepath.Join(src, "lib/c.c")})
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Skipf("no mount namespace here (%v: %s): the bind itself is untested", err, out)
	}
	if string(out) != "long b;\nint c;\n" {
		t.Fatalf("the wrapped command read %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "lib/b.c")); string(b) != "int b;\n" {
		t.Fatalf("the bind leaked out of its namespace: %q", b)
	}
}

func TestOverlayRefusesAPatchThatDoesNotApply(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	src := writeTree(t, map[string]string{"kernel/a.c": "something else\n", "lib/b.c": "int b;\n"})
	_, err := prepareOverlay(context.Background(), src, []Patch{{Name: "example", Text: []byte(twoFilePatch)}}, filepath.Join(t.TempDir(), "p"))
	if err == nil || !errors.Is(err, ErrBadPatch) || !strings.Contains(err.Error(), "example does not apply") {
		t.Fatalf("err = %v", err)
	}
	_, err = prepareOverlay(context.Background(), writeTree(t, map[string]string{"lib/b.c": "int b;\n"}), []Patch{{Name: "example", Text: []byte(twoFilePatch)}}, filepath.Join(t.TempDir(), "p"))
	if err == nil || !strings.Contains(err.Error(), "kernel/a.c is not in the tree") {
		t.Fatalf("err = %v", err)
	}
}

func TestKeyCoversPatches(t *testing.T) {
	src := Source{Identity: "tree"}
	tc := Toolchain{Version: "gcc 12"}
	plain := Key(src, "x86_64", nil, tc)
	a := Key(src, "x86_64", nil, tc, Patch{Name: "a", Text: []byte("x")})
	b := Key(src, "x86_64", nil, tc, Patch{Name: "a", Text: []byte("y")})
	if plain == a || a == b {
		t.Fatalf("keys do not tell patches apart: %s %s %s", plain, a, b)
	}
}

func TestRepathKeepsTimes(t *testing.T) {
	from := t.TempDir()
	to := filepath.Join(t.TempDir(), "copy")
	dir := writeTree(t, map[string]string{
		"tools/objtool/.objtool.o.cmd": "savedcmd_x := gcc -o " + from + "/tools/objtool/objtool.o\n",
		"tools/objtool/objtool.d":      from + "/tools/objtool/objtool.o: a.c\n",
		"tools/objtool/objtool.c":      "int main(void) { return 0; } /* " + from + " */\n",
	})
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, f := range []string{"tools/objtool/.objtool.o.cmd", "tools/objtool/objtool.d"} {
		os.Chtimes(filepath.Join(dir, f), old, old)
	}
	if err := repath(filepath.Join(dir, "tools"), from, to); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tools/objtool/.objtool.o.cmd", "tools/objtool/objtool.d"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if strings.Contains(string(b), from) || !strings.Contains(string(b), to) {
			t.Errorf("%s = %q: want %s replaced by %s", f, b, from, to)
		}
		if st, _ := os.Stat(filepath.Join(dir, f)); !st.ModTime().Equal(old) {
			t.Errorf("%s time stamp %s, want it kept (%s)", f, st.ModTime(), old)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tools/objtool/objtool.c")); !strings.Contains(string(b), from) {
		t.Errorf("a source file was rewritten: %q", b)
	}
	if err := repath(filepath.Join(t.TempDir(), "none"), from, to); err != nil {
		t.Errorf("a build without tools/: %v", err)
	}
}

// A patch that changes a module alone is a change: the noop check looks
// at the modules when the image is the same.
func TestModulesDiffer(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, same, other := write("a.ko", "one"), write("same.ko", "one"), write("other.ko", "two")
	for _, tt := range []struct {
		name          string
		before, after map[string]string
		want          bool
	}{
		{"none", nil, nil, false},
		{"same bytes", map[string]string{"m": a}, map[string]string{"m": same}, false},
		{"changed", map[string]string{"m": a}, map[string]string{"m": other}, true},
		{"new module", map[string]string{"m": a}, map[string]string{"m": same, "n": other}, true},
	} {
		got, err := modulesDiffer(tt.before, tt.after)
		if err != nil || got != tt.want {
			t.Errorf("%s: modulesDiffer = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	if _, err := modulesDiffer(map[string]string{"m": filepath.Join(dir, "gone.ko")}, map[string]string{"m": a}); err == nil {
		t.Error("a missing module file compared without an error")
	}
}
