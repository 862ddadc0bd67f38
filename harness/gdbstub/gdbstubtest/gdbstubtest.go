// Package gdbstubtest boots a bare riscv64 QEMU for tests of gdbstub
// clients: no firmware, no kernel, a program of a few instructions written
// into RAM through the stub, every hart jumping to it from the reset vector
// with a0 = its hart id.
package gdbstubtest

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/gdbstub"
)

// ProgAddr is where the harts start: the first byte of RAM.
const ProgAddr = 0x80000000

// Start boots a two-hart riscv64 VM under accel ("tcg,thread=single"),
// stopped at reset, writes prog at ProgAddr and returns a connection with
// the VM still stopped, and the stub's socket. It skips the test when QEMU
// is not installed; the VM ends with the test.
func Start(t testing.TB, accel string, prog []uint32) (*gdbstub.Conn, string) {
	t.Helper()
	bin, err := exec.LookPath("qemu-system-riscv64")
	if err != nil {
		t.Skip("qemu-system-riscv64 not installed (make deps)")
	}
	// The socket is in the test's temp dir: a test name with a comma
	// would split -gdb's value.
	sock := filepath.Join(t.TempDir(), "gdb.sock")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-machine", "virt", "-bios", "none", "-nodefaults", "-display", "none",
		"-monitor", "none", "-serial", "none", "-accel", accel, "-smp", "2", "-m", "128", "-S",
		"-gdb", "unix:"+sock+",server=on,wait=off")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	var c *gdbstub.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		c, err = gdbstub.Dial(dctx, "unix", sock)
		dcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial: %v", err)
		}
	}
	t.Cleanup(func() { c.Close() })
	var b []byte
	for _, insn := range prog {
		b = binary.LittleEndian.AppendUint32(b, insn)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := c.WriteMemory(wctx, 1, ProgAddr, b); err != nil {
		t.Fatal(err)
	}
	return c, sock
}
