package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const testBanner = "Linux version 7.3.4 (fth@fth) (gcc (Debian 12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC 1970-01-01"

// fakeVmlinux links a small executable with a linux_banner and a GNU
// build id, as a vmlinux has them, and returns its path and build id.
func fakeVmlinux(t *testing.T) (string, string) {
	t.Helper()
	return linkVmlinux(t, "const char linux_banner[] = \""+testBanner+"\\n\";\nint main(void) { return linux_banner[0]; }\n")
}

// linkVmlinux compiles and links C sources (one string per file) into a
// test ELF with a GNU build id, and returns its path and build id.
func linkVmlinux(t *testing.T, sources ...string) (string, string) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to link a test ELF")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "vmlinux")
	args := []string{"-o", out, "-Wl,--build-id=sha1"}
	for i, code := range sources {
		src := filepath.Join(dir, fmt.Sprintf("v%d.c", i))
		if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, src)
	}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Skipf("gcc could not link a test ELF: %v\n%s", err, b)
	}
	s, err := Open(out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, err := s.BuildID()
	if err != nil || len(id) != 40 {
		t.Fatalf("BuildID = %q, %v; want 40 hex digits", id, err)
	}
	return out, id
}

func TestCheck(t *testing.T) {
	path, id := fakeVmlinux(t)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := s.Banner(); err != nil || b != testBanner {
		t.Fatalf("Banner = %q, %v", b, err)
	}
	other := strings.Repeat("ab", 20)
	cpu := "[    5.924004] CPU: 0 UID: 0 PID: 52 Comm: uinit Not tainted 7.3.4 #1 PREEMPT(full) "
	tests := []struct {
		name     string
		log      string
		what     string
		mismatch bool
	}{
		{"build id matches", cpu + id + "\n", "build id", false},
		{"build id differs", cpu + other + "\n", "build id", true},
		{"banner matches", "[    0.000000] " + testBanner + "\n", "linux_banner", false},
		{"banner differs", "[    0.000000] Linux version 7.3.4 (root@vm) (gcc) #2 SMP PREEMPT_DYNAMIC Sat Nov 21 07:01:55 UTC 2026\n", "linux_banner", true},
		{"release matches", cpu + "\n", "release", false},
		{"release differs", "CPU: 1 PID: 3083 Comm: udevd Not tainted 6.1.0-rc6 #0\n", "release", true},
		{"nothing to compare", "[    1.0] random line\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			what, err := s.Check(tt.log)
			if what != tt.what {
				t.Errorf("compared %q, want %q", what, tt.what)
			}
			var me *MismatchError
			if got := errors.Is(err, ErrMismatch); got != tt.mismatch {
				t.Fatalf("err = %v, want mismatch %v", err, tt.mismatch)
			}
			if tt.mismatch && (!errors.As(err, &me) || !strings.Contains(err.Error(), path) || me.Log == "" || me.Vmlinux == "") {
				t.Errorf("mismatch error %v does not name both sides and the file", err)
			}
		})
	}
}

func TestReadLogIdentity(t *testing.T) {
	log := "[    0.000000] " + testBanner + "\n[    5.9][  T52] CPU: 0 UID: 0 PID: 52 Comm: kworker/u8:0 Tainted: G        W  O 7.3.4 #1 PREEMPT(full) " + strings.Repeat("0f", 20) + "\n"
	got := ReadLogIdentity(log)
	want := LogIdentity{BuildID: strings.Repeat("0f", 20), Banner: testBanner, Release: "7.3.4 #1"}
	if got != want {
		t.Errorf("ReadLogIdentity = %+v, want %+v", got, want)
	}
}

// sizeSources are a vmlinux whose functions have sizes the test reads back:
// noinline functions, two static "helper"s of different sizes (as static
// functions of different files share names), a "work" with its ".cold"
// part, and "lto" under the name clang LTO gives it ("lto.llvm.123", which
// kallsyms prints as "lto").
var sizeSources = []string{
	"const char linux_banner[] = \"" + testBanner + "\\n\";\n" +
		"__attribute__((noinline)) static int helper(int x) { return x + 1; }\n" +
		"__attribute__((noinline)) int alpha(int x) { return helper(x) * 3; }\n" +
		"__attribute__((noinline)) int beta(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n" +
		"int work_cold(int x) __asm__(\"work.cold\");\n" +
		"__attribute__((noinline)) int work_cold(int x) { return x - 7; }\n" +
		"__attribute__((noinline)) int work(int x) { return x > 100 ? work_cold(x) : x * x + 2 * x; }\n" +
		"int lto(int x) __asm__(\"lto.llvm.123\");\n" +
		"__attribute__((noinline)) int lto(int x) { return x ^ 0x55; }\n" +
		"int gamma2(int);\n" +
		"int main(int argc, char **argv) { return alpha(argc) + beta(argc) + work(argc) + lto(argc) + gamma2(argc) + linux_banner[0]; }\n",
	"__attribute__((noinline)) static int helper(int x) { int y = x; for (int i = 0; i < 9; i++) y = y * 5 + i; return y; }\n" +
		"int gamma2(int x) { return helper(x); }\n",
}

// elfSizes reads every function's st_size from the ELF at path, by name;
// a name several functions share has several sizes.
func elfSizes(t *testing.T, path string) map[string][]uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string][]uint64{}
	for _, sym := range syms {
		if elf.ST_TYPE(sym.Info) == elf.STT_FUNC && sym.Size > 0 {
			sizes[sym.Name] = append(sizes[sym.Name], sym.Size)
		}
	}
	for _, name := range []string{"alpha", "beta", "work", "work.cold", "lto.llvm.123"} {
		if len(sizes[name]) != 1 {
			t.Fatalf("test ELF: %s has sizes %#x, want one", name, sizes[name])
		}
	}
	if h := sizes["helper"]; len(h) != 2 || h[0] == h[1] {
		t.Fatalf("test ELF: helper has sizes %#x, want two different ones", h)
	}
	return sizes
}

func TestCheckSymbolSizes(t *testing.T) {
	path, id := linkVmlinux(t, sizeSources...)
	size := elfSizes(t, path)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// frame prints a call-trace line the way kallsyms does.
	frame := func(name string, size uint64) string {
		return fmt.Sprintf("[   12.000002]  %s+0x4/%#x\n", name, size)
	}
	alpha, beta, h1, h2 := size["alpha"][0], size["beta"][0], size["helper"][0], size["helper"][1]
	banner := "[    0.000000] " + testBanner + "\n"
	rip := fmt.Sprintf("[   12.000000] RIP: 0010:alpha+0x4/%#x\n[   12.000001] Call Trace:\n", alpha)
	tests := []struct {
		name string
		log  string
		what string
		// fn is the function a size mismatch must name, "" for none; more
		// is how many others it counts.
		fn       string
		more     int
		mismatch bool
	}{
		{name: "frames match", log: rip + frame("beta", beta) + frame("main", size["main"][0]), what: "symbol size"},
		{name: "frames and banner match", log: banner + rip + frame("beta", beta), what: "linux_banner and symbol size"},
		{name: "a size differs", log: banner + rip + frame("beta", beta-1), what: "symbol size", fn: "beta"},
		{name: "every other size counted", log: rip + frame("beta", beta-1) + frame("alpha", alpha+0x10) + frame("work", size["work"][0]+1) + frame("beta", beta+1), what: "symbol size", fn: "beta", more: 2},
		{name: "only module frames", log: "[   12.000001] Call Trace:\n[   12.000002]  alpha+0x4/0x1 [fthmod]\n[   12.000003]  beta+0x0/0x2 [fthmod]\n", what: ""},
		{name: "functions the vmlinux lacks", log: frame("not_in_vmlinux", 0x40), what: ""},
		{name: "module frame beside a matching one", log: rip + frame("beta", beta) + "[   12.000003]  helper+0x0/0x2 [fthmod]\n", what: "symbol size"},
		{name: "shared name, first size", log: frame("helper", h1), what: "symbol size"},
		{name: "shared name, second size", log: frame("helper", h2), what: "symbol size"},
		{name: "shared name, neither size", log: frame("helper", max(h1, h2)+0x100), what: "symbol size", fn: "helper"},
		{name: "cold part by its own size", log: frame("work.cold", size["work.cold"][0]) + frame("work", size["work"][0]), what: "symbol size"},
		{name: "cold part with the function's size", log: frame("work.cold", size["work"][0]), what: "symbol size", fn: "work.cold"},
		{name: "LTO suffix cut by kallsyms", log: frame("lto", size["lto.llvm.123"][0]), what: "symbol size"},
		{name: "LTO suffix cut, size differs", log: frame("lto", size["lto.llvm.123"][0]+1), what: "symbol size", fn: "lto"},
		{name: "build id match skips sizes", log: "[    5.924004] CPU: 0 UID: 0 PID: 52 Comm: uinit Not tainted 7.3.4 #1 PREEMPT(full) " + id + "\n" + frame("beta", beta-1), what: "build id"},
		{name: "banner mismatch reported first", log: "[    0.000000] Linux version 7.3.4 (root@vm) (gcc) #2 SMP\n" + frame("beta", beta-1), what: "linux_banner", mismatch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			what, err := s.Check(tt.log)
			if what != tt.what {
				t.Errorf("compared %q, want %q", what, tt.what)
			}
			if want := tt.mismatch || tt.fn != ""; errors.Is(err, ErrMismatch) != want || (err != nil && !want) {
				t.Fatalf("err = %v, want a mismatch %v", err, want)
			}
			if tt.fn == "" {
				return
			}
			var me *MismatchError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *MismatchError", err)
			}
			if me.Func != tt.fn || me.More != tt.more || me.What != "symbol size" {
				t.Errorf("mismatch names %q (and %d more), want %q (and %d more)", me.Func, me.More, tt.fn, tt.more)
			}
			for _, want := range []string{path, tt.fn + " is " + me.Vmlinux + " bytes in it, the log says " + me.Log} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}
