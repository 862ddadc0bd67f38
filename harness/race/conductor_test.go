package race

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/gdbstub/gdbstubtest"

	"github.com/ftrace-harness/fth/harness/gdbstub"
	"github.com/ftrace-harness/fth/wire/event"
)

// The conductor runs against a real QEMU: a riscv64 virt machine with no
// firmware whose two harts split at 0x80000000 by hart id (a0 from the
// reset vector): hart 1 loops through 0x80000004, hart 0 never goes there.
const (
	hart1Loop = 0x80000004
	hart0Loop = 0x8000000c
	nowhere   = 0x80000100
)

var splitProg = []uint32{
	0x00050663, // beqz a0, .+12 (hart 0 to its own loop)
	0x00158593, // hart 1: addi a1, a1, 1
	0xffdff06f, //         j .-4
	0x00160613, // hart 0: addi a2, a2, 1
	0xffdff06f, //         j .-4
}

// vm is a target.Injector over a bare QEMU and one end of a pipe.
type vm struct {
	sock string
	ch   net.Conn
}

func (v *vm) RaceChannel() io.ReadWriter { return v.ch }
func (v *vm) DialGDB(ctx context.Context) (*gdbstub.Conn, error) {
	return gdbstub.Dial(ctx, "unix", v.sock)
}

// start boots the VM, loads the program, and lets it go: the conductor
// connects anew, as it does to a booted guest.
func start(t *testing.T) (*vm, net.Conn) {
	t.Helper()
	return startProg(t, splitProg)
}

// startProg is start with another program.
func startProg(t *testing.T, prog []uint32) (*vm, net.Conn) {
	t.Helper()
	g, sock := gdbstubtest.Start(t, "tcg,thread=single", prog)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	g.Close()
	host, agent := net.Pipe()
	t.Cleanup(func() { host.Close(); agent.Close() })
	return &vm{sock: sock, ch: host}, agent
}

// agentSide is the test's stand-in for the guest agent.
type agentSide struct {
	t  *testing.T
	c  net.Conn
	in *bufio.Reader
}

func (a *agentSide) send(m event.RaceMsg) {
	a.t.Helper()
	b, _ := json.Marshal(m)
	if _, err := a.c.Write(append(b, '\n')); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agentSide) recv(want string) event.RaceMsg {
	a.t.Helper()
	_ = a.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	line, err := a.in.ReadBytes('\n')
	if err != nil {
		a.t.Fatalf("waiting for %s: %v", want, err)
	}
	var m event.RaceMsg
	if err := json.Unmarshal(line, &m); err != nil {
		a.t.Fatal(err)
	}
	if m.Op != want {
		a.t.Fatalf("got %+v, want %s", m, want)
	}
	return m
}

func serve(t *testing.T, target *vm, hold time.Duration) *Conductor {
	c := &Conductor{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Target: target, PCRegister: 32, HoldLimit: hold}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Serve(ctx); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func TestConductorHoldsTheChosenVCPU(t *testing.T) {
	target, agentConn := start(t)
	c := serve(t, target, 5*time.Second)
	a := &agentSide{t: t, c: agentConn, in: bufio.NewReader(agentConn)}

	for i := 0; i < 3; i++ {
		a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
		a.recv(event.RaceArmed)
		m := a.recv(event.RaceStopped)
		if m.CPU != 1 || m.Addr != hart1Loop || m.Insn != "938515006ff0dfff" {
			t.Fatalf("stopped %+v, want vCPU 1 at %#x over addi a1,a1,1; j .-4 (938515006ff0dfff)", m, hart1Loop)
		}
		a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
		a.recv(event.RaceReleased)
	}

	// The window's look at the target: the bytes, read with the VM
	// running; and memory no vCPU can read is said so, not made up.
	a.send(event.RaceMsg{Op: event.RacePeek, Addr: hart1Loop, Size: 8})
	if m := a.recv(event.RacePeeked); m.Insn != "938515006ff0dfff" {
		t.Errorf("peeked %+v", m)
	}
	a.send(event.RaceMsg{Op: event.RacePeek, Addr: 0x4, Size: 8})
	if m := a.recv(event.RacePeeked); m.Insn != "" || !strings.Contains(m.Msg, "unreadable") {
		t.Errorf("peek of unbacked memory: %+v", m)
	}

	// Asked for vCPU 0 at a place only vCPU 1 goes: a miss, not a hold.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 0, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	if m := a.recv(event.RaceMissed); m.CPU != 1 || !strings.Contains(m.Msg, "not vCPU 0") {
		t.Errorf("missed %+v", m)
	}
	// A place nobody reaches: a timeout, and the VM runs on.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: nowhere, Size: 4, CPU: 1, TimeoutMS: 300})
	a.recv(event.RaceArmed)
	a.recv(event.RaceTimeout)
	if c.Stats.Stopped != 3 || c.Stats.Released != 3 || c.Stats.Missed != 1 || c.Stats.Timeouts != 1 {
		t.Errorf("stats %+v", c.Stats)
	}
}

// An arm that passes others holds only its own vCPU at a place both harts
// run, hart 0 on every turn of its loop and hart 1 once in a million:
// hart 0 gets there first and is stepped past it, never a miss.
func TestConductorPassesOtherVCPUs(t *testing.T) {
	const shared = 0x80000010
	target, agentConn := startProg(t, []uint32{
		0x00050863, // beqz a0, shared (hart 0)
		0x001002b7, // hart 1: lui t0, 0x100 (a million turns)
		0xfff28293, // 1: addi t0, t0, -1
		0xfe029ee3, //    bnez t0, 1b
		0x00158593, // shared: addi a1, a1, 1
		0xfe0518e3, //         bnez a0, hart 1's delay
		0xff9ff06f, //         j shared (hart 0)
	})
	c := serve(t, target, 5*time.Second)
	a := &agentSide{t: t, c: agentConn, in: bufio.NewReader(agentConn)}
	const arms = 5
	for range arms {
		a.send(event.RaceMsg{Op: event.RaceArm, Addr: shared, Size: 4, CPU: 1, TimeoutMS: 5000, PassOthers: true})
		a.recv(event.RaceArmed)
		if m := a.recv(event.RaceStopped); m.CPU != 1 || m.Addr != shared {
			t.Fatalf("stopped %+v, want vCPU 1 at %#x", m, shared)
		}
		a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
		a.recv(event.RaceReleased)
	}
	if c.Stats.Missed != 0 || c.Stats.Passed < arms || c.Stats.Stopped != arms {
		t.Errorf("stats %+v, want %d stops, vCPU 0 passed at least once each (a miss without PassOthers), no miss", c.Stats, arms)
	}
}

// An agent that never releases (a guest that died while the task was
// held) must not leave the vCPU stopped: the host lets it go.
func TestConductorReleasesAfterHoldLimit(t *testing.T) {
	target, agentConn := start(t)
	c := serve(t, target, 300*time.Millisecond)
	a := &agentSide{t: t, c: agentConn, in: bufio.NewReader(agentConn)}
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	if m := a.recv(event.RaceError); !strings.Contains(m.Msg, "released the held vCPU") {
		t.Errorf("error %+v", m)
	}
	// Running again: the next injection works.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	if c.Stats.ForcedReleases != 1 {
		t.Errorf("stats %+v", c.Stats)
	}
}

// An arm's bound lets its vCPU go when the agent's release does not come
// (its CPU waiting on the held one), with no error: the late release is
// answered as such, and a release in time is not.
func TestConductorLetsGoAtTheArmsBound(t *testing.T) {
	target, agentConn := start(t)
	c := serve(t, target, 5*time.Second)
	a := &agentSide{t: t, c: agentConn, in: bufio.NewReader(agentConn)}
	arm := event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000, BoundMS: 300}

	a.send(arm)
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	if m := a.recv(event.RaceReleased); m.Late {
		t.Errorf("a release in time answered %+v", m)
	}

	a.send(arm)
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	time.Sleep(time.Second)
	// Let go: a new arm of vCPU 1 is taken (an arm of a held vCPU is
	// refused) once the late release has been answered.
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	m := a.recv(event.RaceReleased)
	if !m.Late || m.CPU != 1 {
		t.Errorf("the late release answered %+v, want released, late, vCPU 1", m)
	}
	// It says where the free vCPU was when the bound passed: hart 0's
	// own loop, and nothing of the held one.
	if pc, ok := m.PCs[0]; !ok || pc < hart0Loop || pc > hart0Loop+4 || len(m.PCs) != 1 {
		t.Errorf("the late release's pcs %#v, want only vCPU 0 in its loop at %#x", m.PCs, hart0Loop)
	}
	a.send(arm)
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	a.recv(event.RaceReleased)
	if c.Stats.BoundReleases != 1 || c.Stats.ForcedReleases != 0 || c.Stats.Released != 2 {
		t.Errorf("stats %+v, want 1 bound release, 2 agent releases, none forced", c.Stats)
	}
}

// The INT3 window holds two vCPUs at once (the patcher, then the task
// that trapped) and lets them go one at a time; its patcher breakpoint is
// conditional, and the stop reports bytes read the moment it happened.
func TestConductorHoldsTwoAndConditions(t *testing.T) {
	const hart0Loop = 0x8000000c
	target, agentConn := start(t)
	c := serve(t, target, 5*time.Second)
	a := &agentSide{t: t, c: agentConn, in: bufio.NewReader(agentConn)}

	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	// With vCPU 1 held, vCPU 0 still runs into its own loop.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart0Loop, Size: 4, CPU: 0, TimeoutMS: 5000, LookAddr: 0x80000000, LookLen: 4})
	a.recv(event.RaceArmed)
	if m := a.recv(event.RaceStopped); m.CPU != 0 || m.Seen != "63060500" {
		t.Errorf("second hold %+v, want vCPU 0 and the first instruction seen (63060500)", m)
	}
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart0Loop, Size: 4, CPU: 0, TimeoutMS: 5000})
	if m := a.recv(event.RaceError); !strings.Contains(m.Msg, "is held") {
		t.Errorf("arm for a held vCPU: %+v", m)
	}
	// vCPU 1 goes and runs; vCPU 0 stays held until its own release.
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	a.recv(event.RaceReleased)
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	for _, cpu := range []int{0, 1} {
		a.send(event.RaceMsg{Op: event.RaceRelease, CPU: cpu})
		a.recv(event.RaceReleased)
	}
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	if m := a.recv(event.RaceError); !strings.Contains(m.Msg, "not held") {
		t.Errorf("release of a free vCPU: %+v", m)
	}

	// A condition that holds stops; one that never holds lets the vCPU
	// run through the breakpoint until the timeout.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000, CondAddr: 0x80000000, CondWant: "63060500"})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	a.recv(event.RaceReleased)
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 300, CondAddr: 0x80000000, CondWant: "00000000"})
	a.recv(event.RaceArmed)
	a.recv(event.RaceTimeout)
	// The condition on what a register points at: hart 1's a0 (GDB
	// register 10) is its hart id, 1, so a0+0x7fffffff is the program's
	// first word.
	a0 := 10
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000, CondReg: &a0, CondAddr: 0x7fffffff, CondWant: "63060500"})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	a.recv(event.RaceReleased)
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 300, CondReg: &a0, CondAddr: 0x80000000, CondWant: "63060500"})
	a.recv(event.RaceArmed)
	a.recv(event.RaceTimeout)
	if c.Stats.CondRuns == 0 || c.Stats.Stopped != 5 {
		t.Errorf("stats %+v: want the unmet conditions run through, 5 holds", c.Stats)
	}
	// A chained arm, for an agent that sits on the vCPU its first arm
	// holds: the host arms the second itself, lets the first go once the
	// second holds (or never does), and the second HoldMS later.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000,
		Then: &event.RaceMsg{Op: event.RaceArm, Addr: hart0Loop, Size: 4, CPU: 0, TimeoutMS: 5000, HoldMS: 200}})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.recv(event.RaceArmed)
	if m := a.recv(event.RaceStopped); m.CPU != 0 {
		t.Errorf("chained hold %+v", m)
	}
	if m := a.recv(event.RaceReleased); m.CPU != 1 {
		t.Errorf("first release %+v, want vCPU 1's", m)
	}
	if m := a.recv(event.RaceReleased); m.CPU != 0 {
		t.Errorf("second release %+v, want vCPU 0's", m)
	}
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000,
		Then: &event.RaceMsg{Op: event.RaceArm, Addr: nowhere, Size: 4, CPU: 0, TimeoutMS: 300, HoldMS: 200}})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.recv(event.RaceArmed)
	a.recv(event.RaceTimeout)
	if m := a.recv(event.RaceReleased); m.CPU != 1 {
		t.Errorf("release after the chained timeout %+v", m)
	}
	// Three arms: the first vCPU is let go when the second holds; the
	// third, on the first's vCPU, is armed as the second is let go.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000,
		Then: &event.RaceMsg{Op: event.RaceArm, Addr: hart0Loop, Size: 4, CPU: 0, TimeoutMS: 5000, HoldMS: 100,
			Then: &event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000, HoldMS: 100}}})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.recv(event.RaceArmed)
	if m := a.recv(event.RaceStopped); m.CPU != 0 {
		t.Errorf("second hold %+v", m)
	}
	if m := a.recv(event.RaceReleased); m.CPU != 1 {
		t.Errorf("the first let go once the second held: %+v", m)
	}
	if m := a.recv(event.RaceReleased); m.CPU != 0 {
		t.Errorf("the second let go as the third is armed: %+v", m)
	}
	a.recv(event.RaceArmed)
	if m := a.recv(event.RaceStopped); m.CPU != 1 || m.Addr != hart1Loop {
		t.Errorf("third hold %+v, want vCPU 1 at %#x again", m, hart1Loop)
	}
	if m := a.recv(event.RaceReleased); m.CPU != 1 {
		t.Errorf("the last release %+v", m)
	}
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000,
		Then: &event.RaceMsg{Op: event.RaceArm, Addr: hart0Loop, Size: 4, CPU: 0, TimeoutMS: 5000,
			Then: &event.RaceMsg{Op: event.RaceArm, Addr: hart0Loop, Size: 4, CPU: 0}}})
	if m := a.recv(event.RaceError); !strings.Contains(m.Msg, "third arm") {
		t.Errorf("a third arm on the second's vCPU: %+v", m)
	}
	// HoldMS alone: the host lets the vCPU go itself.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000, HoldMS: 100})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	if m := a.recv(event.RaceReleased); m.CPU != 1 {
		t.Errorf("timed release %+v", m)
	}
	// Running again after all that.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	a.recv(event.RaceReleased)
}

// A peek while a vCPU is held keeps it held: the stub stops the VM for
// the read and resumes only the others. Checked through the VM itself: a
// place only the held hart passes is never reached.
func TestConductorPeekKeepsTheHold(t *testing.T) {
	target, agentConn := start(t)
	serve(t, target, 5*time.Second)
	a := &agentSide{t: t, c: agentConn, in: bufio.NewReader(agentConn)}
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	for range 3 {
		a.send(event.RaceMsg{Op: event.RacePeek, Addr: hart1Loop, Size: 8})
		a.recv(event.RacePeeked)
	}
	// hart 1's loop's second instruction: reached at once if it runs.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop + 4, Size: 4, CPU: 0, TimeoutMS: 500})
	a.recv(event.RaceArmed)
	if m := a.recv(event.RaceTimeout); m.Op != event.RaceTimeout {
		t.Errorf("the held hart ran after a peek: %+v", m)
	}
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	a.recv(event.RaceReleased)
}

// A trace holds nobody: hart 1 passes its loop's first instruction once
// per iteration, so every recorded stop is there, on vCPU 1, with a1 one
// more than at the stop before, and both looks read; a range a1 never reaches records none
// and the hart runs on through the unmet condition.
func TestConductorTraceRecordsEveryStopInRange(t *testing.T) {
	target, agentConn := start(t)
	c := serve(t, target, 5*time.Second)
	a := &agentSide{t: t, c: agentConn, in: bufio.NewReader(agentConn)}
	a1 := 11
	for _, tc := range []struct {
		name     string
		lo, hi   uint64
		wantSome bool
	}{
		{"every value", 0, 1 << 63, true},
		{"no value", 1 << 62, 1 << 63, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.send(event.RaceMsg{Op: event.RaceTrace, Addrs: []uint64{hart1Loop}, Size: 4, CondReg: &a1, CondAddr: tc.lo, CondEnd: tc.hi,
				LookAddr: hart1Loop, LookLen: 4, Look2Addr: hart1Loop + 4, Look2Len: 4, TimeoutMS: 10000})
			a.recv(event.RaceArmed)
			time.Sleep(400 * time.Millisecond)
			a.send(event.RaceMsg{Op: event.RaceUntrace})
			m := a.recv(event.RaceUntraced)
			if !tc.wantSome {
				if m.Count != 0 || len(m.Stops) != 0 {
					t.Fatalf("a range a1 never reaches recorded %d stops", m.Count)
				}
				return
			}
			if m.Count < 2 || len(m.Stops) != min(m.Count, event.MaxTraceStops) {
				t.Fatalf("count %d, %d stops: want at least 2 in 400 ms, all kept up to %d", m.Count, len(m.Stops), event.MaxTraceStops)
			}
			for i, s := range m.Stops {
				if s.Addr != hart1Loop || s.CPU != 1 || s.Seen != "938515006ff0dfff" {
					t.Fatalf("stop %d: %+v, want vCPU 1 at %#x over addi a1,a1,1 (93851500), then the second look's j .-4 (6ff0dfff)", i, s, hart1Loop)
				}
				if i > 0 && s.Reg != m.Stops[i-1].Reg+1 {
					t.Fatalf("stop %d: a1 %d after %d: a stop was missed or counted twice", i, s.Reg, m.Stops[i-1].Reg)
				}
			}
		})
	}
	// The trace let both harts run: an arm still holds hart 1 after it.
	a.send(event.RaceMsg{Op: event.RaceArm, Addr: hart1Loop, Size: 4, CPU: 1, TimeoutMS: 5000})
	a.recv(event.RaceArmed)
	a.recv(event.RaceStopped)
	a.send(event.RaceMsg{Op: event.RaceRelease, CPU: 1})
	a.recv(event.RaceReleased)
	if c.Stats.CondRuns == 0 {
		t.Errorf("stats %+v: want the unmet range's stops run through", c.Stats)
	}
}
