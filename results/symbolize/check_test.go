package symbolize

import (
	"errors"
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
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to link a test ELF")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "v.c")
	code := "const char linux_banner[] = \"" + testBanner + "\\n\";\nint main(void) { return linux_banner[0]; }\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "vmlinux")
	if b, err := exec.Command(cc, "-o", out, "-Wl,--build-id=sha1", src).CombinedOutput(); err != nil {
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
