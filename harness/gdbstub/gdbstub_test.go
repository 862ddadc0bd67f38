package gdbstub_test

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/gdbstub"
	"github.com/ftrace-harness/fth/harness/gdbstub/gdbstubtest"
)

func TestParseStop(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want gdbstub.Stop
		bad  bool
	}{
		{in: "T05thread:01;", want: gdbstub.Stop{Signal: 5, Thread: 1}},
		{in: "T02thread:0a;swbreak:;", want: gdbstub.Stop{Signal: 2, Thread: 10}},
		{in: "T05thread:p01.02;", want: gdbstub.Stop{Signal: 5, Thread: 2}},
		{in: "S05", want: gdbstub.Stop{Signal: 5}},
		{in: "W00", want: gdbstub.Stop{Exited: true}},
		{in: "OK", bad: true},
		{in: "T", bad: true},
		{in: "T05thread:zz;", bad: true},
	} {
		got, err := gdbstub.ParseStop(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("gdbstub.ParseStop(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		got.Raw = ""
		if err != nil || got != tc.want {
			t.Errorf("gdbstub.ParseStop(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// The real-QEMU tests (gdbstubtest) run a two-instruction loop on a riscv64 virt machine
// with no firmware: every hart jumps from the reset vector to 0x80000000,
// with a0 = its hart id.
const (
	loopAddr = gdbstubtest.ProgAddr
	riscvPC  = 32 // GDB's riscv register number of pc
	riscvA0  = 10
)

var riscvLoop = []uint32{
	0x00150513, // addi a0, a0, 1
	0xffdff06f, // j .-4
}

// startRISCV boots a bare riscv64 VM running riscvLoop, stopped at
// reset, and checks the stub's view of it.
func startRISCV(t *testing.T, accel string) (*gdbstub.Conn, []int) {
	t.Helper()
	c, _ := gdbstubtest.Start(t, accel, riscvLoop)
	threads, err := c.Threads(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(threads, []int{1, 2}) {
		t.Fatalf("threads = %v, want [1 2]", threads)
	}
	got, err := c.ReadMemory(tctx(t), 2, loopAddr, 4*len(riscvLoop))
	if err != nil || binary.LittleEndian.Uint32(got) != riscvLoop[0] {
		t.Fatalf("read back %x, %v; want the loop", got, err)
	}
	return c, threads
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func reg(t *testing.T, c *gdbstub.Conn, thread, r int) uint64 {
	t.Helper()
	v, err := c.Register(tctx(t), thread, r)
	if err != nil {
		t.Fatalf("register %d of thread %d: %v", r, thread, err)
	}
	return v
}

// TestHoldOneVCPUAtBreakpoint is the race injection's whole use of the stub:
// stop at an exact instruction, keep that vCPU stopped while the others
// run, then step it alone.
func TestHoldOneVCPUAtBreakpoint(t *testing.T) {
	// The subtests are named without the comma: the socket path is in
	// their temp dir, and QEMU splits -gdb's value at commas.
	for name, accel := range map[string]string{"single": "tcg,thread=single", "multi": "tcg,thread=multi"} {
		t.Run(name, func(t *testing.T) {
			c, threads := startRISCV(t, accel)
			ctx := tctx(t)
			bp := uint64(loopAddr + 4)
			if err := c.SetBreakpoint(ctx, gdbstub.Hardware, bp, 4); err != nil {
				t.Fatal(err)
			}
			if err := c.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			stop, err := c.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if stop.Signal != 5 || !slices.Contains(threads, stop.Thread) {
				t.Fatalf("stop = %+v, want SIGTRAP on a vCPU", stop)
			}
			held := stop.Thread
			if pc := reg(t, c, held, riscvPC); pc != bp {
				t.Fatalf("thread %d stopped at pc %#x, want %#x", held, pc, bp)
			}
			heldA0 := reg(t, c, held, riscvA0)
			if err := c.ClearBreakpoint(ctx, gdbstub.Hardware, bp, 4); err != nil {
				t.Fatal(err)
			}

			// The others run; the held vCPU does not move.
			other := threads[0]
			if other == held {
				other = threads[1]
			}
			otherA0 := reg(t, c, other, riscvA0)
			if err := c.ResumeExcept(ctx, threads, held); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if _, err := c.Interrupt(ctx); err != nil {
				t.Fatal(err)
			}
			if pc, a0 := reg(t, c, held, riscvPC), reg(t, c, held, riscvA0); pc != bp || a0 != heldA0 {
				t.Errorf("held thread %d moved: pc %#x a0 %d, want pc %#x a0 %d", held, pc, a0, bp, heldA0)
			}
			otherNow := reg(t, c, other, riscvA0)
			if otherNow <= otherA0+1000 {
				t.Errorf("thread %d did not run while %d was held: a0 %d -> %d", other, held, otherA0, otherNow)
			}

			// One step of the held vCPU alone: the jump back to the add.
			if _, err := c.Step(ctx, held); err != nil {
				t.Fatal(err)
			}
			if pc := reg(t, c, held, riscvPC); pc != loopAddr {
				t.Errorf("after one step pc = %#x, want %#x", pc, uint64(loopAddr))
			}
			if _, err := c.Step(ctx, held); err != nil {
				t.Fatal(err)
			}
			if a0 := reg(t, c, held, riscvA0); a0 != heldA0+1 {
				t.Errorf("after the add a0 = %d, want %d", a0, heldA0+1)
			}
			if a0 := reg(t, c, other, riscvA0); a0 != otherNow {
				t.Errorf("thread %d ran during another's step: a0 %d -> %d", other, otherNow, a0)
			}
			if err := c.Detach(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRequestWhileRunningIsRefused: a request to a running stub would be
// taken as an interrupt by QEMU; the client refuses it instead.
func TestRequestWhileRunningIsRefused(t *testing.T) {
	c, _ := startRISCV(t, "tcg,thread=single")
	ctx := tctx(t)
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, 1, riscvPC); err == nil {
		t.Fatal("Register while running succeeded")
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(wctx); err == nil {
		t.Fatal("Wait returned a stop with nothing to stop the loop")
	}
	stop, err := c.Interrupt(ctx)
	if err != nil || stop.Signal != 2 {
		t.Fatalf("Interrupt = %+v, %v; want SIGINT", stop, err)
	}
}
