package qemu

import (
	"errors"
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
		"-no-reboot",
		"-qmp", "unix:/s/qmp.sock,server=on,wait=off",
		"-chardev", "stdio,id=con0,signal=off",
		"-serial", "chardev:con0",
		"-chardev", "socket,id=agent0,path=/s/agent.sock,server=on,wait=on",
		"-device", "virtio-serial-pci,id=vser0",
		"-device", "virtserialport,bus=vser0.0,chardev=agent0,name=fth.agent",
		"-nodefaults",
		"-initrd", "/i/agent.cpio",
	}
	if got := c.Args(); !slices.Equal(got, want) {
		t.Errorf("Args() =\n%q\nwant\n%q", got, want)
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
}

func TestArchCmdlineIncluded(t *testing.T) {
	a, _ := arch.Lookup("riscv64")
	c := Config{Arch: a}
	if got := c.KernelCmdline(); !strings.Contains(got, "console=ttyS0") || !strings.Contains(got, "riscv_isa_fallback") {
		t.Errorf("riscv64 cmdline = %q, want the arch's own parameters", got)
	}
}
