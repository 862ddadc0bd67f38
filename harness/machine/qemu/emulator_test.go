package qemu

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/toolroot"
)

func TestParseEmulator(t *testing.T) {
	tests := []struct {
		in   string
		want Emulator
		bad  bool
	}{
		{"", EmulatorHost, false},
		{"host", EmulatorHost, false},
		{"7.2", QEMU72, false},
		{"11.1", QEMU111, false},
		{"11", "", true},
		{"8.2", "", true},
		{"qemu-11.1", "", true},
	}
	for _, tt := range tests {
		got, err := ParseEmulator(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrBadEmulator) || !strings.Contains(err.Error(), "choose one of default, host, 7.2, 11.1") {
				t.Errorf("ParseEmulator(%q) = %v, want ErrBadEmulator listing the choices", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseEmulator(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestEmulatorSame(t *testing.T) {
	tests := []struct {
		a, b Emulator
		want bool
	}{
		{EmulatorHost, QEMU72, true},
		{"", EmulatorHost, true},
		{QEMU72, QEMU111, false},
		{EmulatorHost, QEMU111, false},
		{QEMU111, QEMU111, true},
	}
	for _, tt := range tests {
		if got := tt.a.Same(tt.b); got != tt.want {
			t.Errorf("%q.Same(%q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// fakeRoot is a complete root with the arch's QEMU in it.
func fakeRoot(t *testing.T, bins ...string) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755)
	os.MkdirAll(filepath.Join(dir, "tmp"), 0o755)
	os.WriteFile(filepath.Join(dir, ".fth-complete"), nil, 0o644)
	for _, b := range bins {
		os.WriteFile(filepath.Join(dir, "usr/bin", b), nil, 0o755)
	}
	return dir
}

// QEMU in the root runs through bwrap with the socket directory, kernel and
// initramfs bound at their own paths (and /dev/kvm for KVM); its command
// line is Args unchanged, and the repro says bwrap too.
func TestCommandInRoot(t *testing.T) {
	if _, err := exec.LookPath(toolroot.Bwrap); err != nil {
		t.Skip("no bwrap")
	}
	c := Config{Arch: x86(t), Kernel: "/k/bzImage", Initrd: "/i/agent.cpio", CPUs: 2, MemoryMB: 1024, Accel: AccelKVM, SocketDir: "/tmp/fth-vm-1", Emulator: QEMU111, Root: fakeRoot(t, "qemu-system-x86_64")}
	bin, args, err := c.Command()
	if err != nil {
		t.Fatal(err)
	}
	if bin != toolroot.Bwrap {
		t.Fatalf("bin = %s, want bwrap", bin)
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{"--die-with-parent", "--bind /tmp/fth-vm-1 /tmp/fth-vm-1", "--ro-bind /k/bzImage /k/bzImage", "--ro-bind /i/agent.cpio /i/agent.cpio", "--dev-bind-try /dev/kvm /dev/kvm"} {
		if !strings.Contains(joined, want) {
			t.Errorf("bwrap args lack %q:\n%s", want, joined)
		}
	}
	sep := slices.Index(args, "--")
	if sep < 0 || args[sep+1] != "qemu-system-x86_64" || !slices.Equal(args[sep+2:], c.Args()) {
		t.Errorf("after --: %q, want qemu-system-x86_64 and Args()", args[sep+1:])
	}
	if r := c.Repro(); !strings.HasPrefix(r, "bwrap --die-with-parent ") || !strings.Contains(r, " -- qemu-system-x86_64 -machine q35") {
		t.Errorf("Repro = %s", r)
	}
	c.Accel = AccelTCGSingle
	if _, args, _ := c.Command(); slices.Contains(args, "/dev/kvm") {
		t.Error("/dev/kvm bound for TCG")
	}
}

func TestCommandInRootErrors(t *testing.T) {
	a := x86(t)
	tests := []struct {
		name, root, want string
	}{
		{"no root", filepath.Join(t.TempDir(), "none"), "run make deps (or bash scripts/toolroot.sh)"},
		{"no QEMU for the arch", fakeRoot(t, "qemu-system-riscv64"), "no /usr/bin/qemu-system-x86_64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Config{Arch: a, Emulator: QEMU111, Root: tt.root, SocketDir: "/tmp/s"}.Command()
			if !errors.Is(err, ErrQEMU) || !errors.Is(err, toolroot.ErrMissing) || !strings.Contains(err.Error(), "--qemu 11.1") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrQEMU and ErrMissing naming --qemu 11.1 and %q", err, tt.want)
			}
		})
	}
}

// The host's QEMU is unchanged: no bwrap, no prefix on the repro.
func TestCommandOnHost(t *testing.T) {
	c := Config{Arch: x86(t), Kernel: "/k/bzImage", CPUs: 1, MemoryMB: 256, Accel: AccelTCGSingle, SocketDir: "/s"}
	if strings.HasPrefix(c.Repro(), "bwrap") {
		t.Errorf("host repro through bwrap: %s", c.Repro())
	}
	bin, args, err := c.Command()
	if err != nil {
		t.Skip(err) // no QEMU on this machine
	}
	if filepath.Base(bin) != "qemu-system-x86_64" || !slices.Equal(args, c.Args()) {
		t.Errorf("Command() = %s %q", bin, args)
	}
}

// The root's QEMU answers its version through bwrap, and --qemu 7.2 is
// checked against the host's.
func TestProbeVersion(t *testing.T) {
	a := x86(t)
	if _, err := exec.LookPath(a.QEMU); err == nil {
		v, line, err := Config{Arch: a, Emulator: EmulatorHost}.ProbeVersion(t.Context())
		if err != nil || v < 100 || !strings.Contains(line, "QEMU emulator version") {
			t.Errorf("host: %d %q %v", v, line, err)
		}
		_, _, err72 := Config{Arch: a, Emulator: QEMU72}.ProbeVersion(t.Context())
		if (v == 702) != (err72 == nil) {
			t.Errorf("host QEMU %d, --qemu 7.2: %v", v, err72)
		}
	}
	out, err := exec.Command("bash", "../../../scripts/toolroot.sh", "path").Output()
	if err != nil {
		t.Skip(err)
	}
	root := strings.TrimSpace(string(out))
	if _, err := toolroot.Open(root); err != nil {
		t.Skip(err)
	}
	v, line, err := Config{Arch: a, Emulator: QEMU111, Root: root}.ProbeVersion(t.Context())
	if err != nil || v != 1101 || !strings.Contains(line, "11.1") {
		t.Errorf("root: %d %q %v", v, line, err)
	}
}
