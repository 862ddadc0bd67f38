package qemu

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
)

func x86(t *testing.T) arch.Arch {
	t.Helper()
	a, err := arch.Lookup("x86_64")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestArgsGolden(t *testing.T) {
	c := Config{Arch: x86(t), Kernel: "/k/bzImage", Initrd: "/i/agent.cpio", Cmdline: []string{"preempt=full", "fth.n=2000"}, CPUs: 2, MemoryMB: 1024, Accel: AccelTCGSingle, SocketDir: "/s"}
	want := []string{
		"-machine", "q35",
		"-accel", "tcg,thread=single",
		"-cpu", "max",
		"-smp", "2",
		"-m", "1024",
		"-kernel", "/k/bzImage",
		"-append", "console=ttyS0 panic=-1 nokaslr printk.time=1 preempt=full fth.n=2000",
		"-display", "none",
		"-monitor", "none",
		"-qmp", "unix:/s/qmp.sock,server=on,wait=off",
		"-chardev", "stdio,id=con0,signal=off",
		"-serial", "chardev:con0",
		"-chardev", "socket,id=agent0,path=/s/agent.sock,server=on,wait=on",
		"-device", "virtio-serial-pci,id=vser0",
		"-device", "virtserialport,bus=vser0.0,chardev=agent0,name=fth.agent",
		"-nodefaults",
		"-initrd", "/i/agent.cpio",
		"-action", "reboot=shutdown,shutdown=pause",
		"-d", "cpu_reset", "-D", "/s/qemu-reset.log",
	}
	if got := c.Args(); !slices.Equal(got, want) {
		t.Errorf("Args() =\n%q\nwant\n%q", got, want)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/args/*.golden from the current command lines")

// Every arch row boots with a command line someone has read once: a change
// to the table or to Args shows up as a diff of testdata/args/<arch>.golden
// (go test -run TestArgsGoldenEveryArch -update rewrites them).
func TestArgsGoldenEveryArch(t *testing.T) {
	for _, a := range arch.All() {
		t.Run(string(a.Name), func(t *testing.T) {
			c := Config{Arch: a, Kernel: "/k/" + filepath.Base(a.Image), Initrd: "/i/agent.cpio", Cmdline: []string{"preempt=full", "fth.n=2000"}, CPUs: 2, MemoryMB: 1024, Accel: AccelTCGSingle, SocketDir: "/s"}
			got := strings.Join(c.Args(), "\n") + "\n"
			path := filepath.Join("testdata", "args", string(a.Name)+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestArgsGoldenEveryArch -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("Args() for %s differs from %s:\n%s\nwant\n%s", a.Name, path, got, want)
			}
		})
	}
}

func TestAccelArgs(t *testing.T) {
	for accel, want := range map[Accel]string{AccelKVM: "kvm", AccelTCGMulti: "tcg,thread=multi", AccelTCGSingle: "tcg,thread=single"} {
		c := Config{Arch: x86(t), Accel: accel, CPUs: 1, MemoryMB: 64}
		args := c.Args()
		i := slices.Index(args, "-accel")
		if i < 0 || args[i+1] != want {
			t.Errorf("%s: -accel %v, want %s", accel, args, want)
		}
	}
}

func TestParseAccel(t *testing.T) {
	for _, s := range []string{"auto", "kvm", "tcg-single", "tcg-multi"} {
		if _, err := ParseAccel(s); err != nil {
			t.Errorf("ParseAccel(%q): %v", s, err)
		}
	}
	if _, err := ParseAccel("tcg"); !errors.Is(err, ErrBadAccel) || !strings.Contains(err.Error(), "tcg-single") {
		t.Errorf("ParseAccel(tcg) = %v, want ErrBadAccel listing the choices", err)
	}
}

func TestReproQuotes(t *testing.T) {
	c := Config{Arch: x86(t), Kernel: "/k/bzImage", CPUs: 2, MemoryMB: 512, Accel: AccelTCGMulti, SocketDir: "/s"}
	r := c.Repro()
	if !strings.HasPrefix(r, "qemu-system-x86_64 ") || !strings.Contains(r, "-append 'console=ttyS0 panic=-1 nokaslr printk.time=1'") {
		t.Errorf("Repro() = %s", r)
	}
	if !strings.HasSuffix(r, " -no-reboot") || strings.Contains(r, "-action") || strings.Contains(r, "cpu_reset") {
		t.Errorf("Repro() = %s: want -no-reboot, so a VM started by hand exits when it ends", r)
	}
}

func TestArchCmdlineIncluded(t *testing.T) {
	a, _ := arch.Lookup("riscv64")
	c := Config{Arch: a}
	if got := c.KernelCmdline(); !strings.Contains(got, "console=ttyS0") || !strings.Contains(got, "riscv_isa_fallback") {
		t.Errorf("riscv64 cmdline = %q, want the arch's own parameters", got)
	}
}

func TestWideningArgs(t *testing.T) {
	tests := []struct {
		name    string
		w       Widening
		version int
		accel   string
		extra   []string
	}{
		{"none", Widening{}, 0, "tcg,thread=single", nil},
		{"singlestep 7.2", Widening{Singlestep: true}, 0, "tcg,thread=single", []string{"-singlestep"}},
		{"singlestep 8.2", Widening{Singlestep: true}, 802, "tcg,thread=single,one-insn-per-tb=on", nil},
		{"icount", Widening{Icount: "shift=auto"}, 0, "tcg,thread=single", []string{"-icount", "shift=auto"}},
		{"both", Widening{Singlestep: true, Icount: "shift=0"}, 702, "tcg,thread=single", []string{"-singlestep", "-icount", "shift=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Arch: x86(t), Accel: AccelTCGSingle, CPUs: 1, MemoryMB: 64, Widen: tt.w, QEMUVersion: tt.version}
			args := c.Args()
			if args[3] != tt.accel {
				t.Errorf("-accel %q, want %q", args[3], tt.accel)
			}
			base := Config{Arch: x86(t), Accel: AccelTCGSingle, CPUs: 1, MemoryMB: 64}.Args()
			base = base[:len(base)-6] // -action and -d come before the widening
			tt.extra = append([]string{"-action", "reboot=shutdown,shutdown=pause", "-d", "cpu_reset", "-D", "qemu-reset.log"}, tt.extra...)
			if got := args[len(base):]; !slices.Equal(got, tt.extra) {
				t.Errorf("extra args %q, want %q", got, tt.extra)
			}
		})
	}
}

func TestWideningCheck(t *testing.T) {
	tests := []struct {
		w       Widening
		accel   Accel
		wantErr string
	}{
		{Widening{}, AccelKVM, ""},
		{Widening{Singlestep: true}, AccelTCGMulti, ""},
		{Widening{Singlestep: true}, AccelKVM, "needs TCG"},
		{Widening{Icount: "shift=auto"}, AccelTCGMulti, "one TCG thread"},
		{Widening{Icount: "shift=auto"}, AccelTCGSingle, ""},
	}
	for _, tt := range tests {
		err := tt.w.Check(tt.accel)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v with %s: err = %v, want %q", tt.w, tt.accel, err, tt.wantErr)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]int{
		"QEMU emulator version 7.2.15 (Debian 1:7.2+dfsg-7+deb12u13)\nCopyright (c) 2003-2022": 702,
		"QEMU emulator version 10.1.0": 1001,
	} {
		if got, err := parseVersion(in); err != nil || got != want {
			t.Errorf("parseVersion(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseVersion("garbage"); err == nil {
		t.Error("parseVersion(garbage) succeeded")
	}
}

func TestBoardArgs(t *testing.T) {
	c := Config{Arch: x86(t), Accel: AccelTCGSingle, CPUs: 1, MemoryMB: 64, SSHPort: 2222, Reboot: true}
	args := strings.Join(c.Args(), " ")
	if strings.Contains(args, "-no-reboot") || strings.Contains(args, "-action") {
		t.Error("a board VM must reboot on panic, not exit or pause")
	}
	if !strings.Contains(args, "-netdev user,id=net0,hostfwd=tcp:127.0.0.1:2222-:22 -device virtio-net-pci,netdev=net0") {
		t.Errorf("no loopback-only port forward in %s", args)
	}
}
