package raceport

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/wire/event"
)

// host is the other end of a Port: it answers each message the guest
// sends with the replies answer returns for it.
func host(t *testing.T, answer func(event.RaceMsg) []event.RaceMsg) (*Port, <-chan event.RaceMsg) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	guest, other := os.NewFile(uintptr(fds[0]), "guest"), os.NewFile(uintptr(fds[1]), "host")
	t.Cleanup(func() { guest.Close(); other.Close() })
	seen := make(chan event.RaceMsg, 16)
	go func() {
		in := bufio.NewReader(other)
		for {
			line, err := in.ReadBytes('\n')
			if err != nil {
				return
			}
			var m event.RaceMsg
			if json.Unmarshal(line, &m) != nil {
				return
			}
			seen <- m
			for _, r := range answer(m) {
				b, _ := json.Marshal(r)
				if _, err := other.Write(append(b, '\n')); err != nil {
					return
				}
			}
		}
	}()
	return New(guest), seen
}

func TestArmAndRelease(t *testing.T) {
	p, seen := host(t, func(m event.RaceMsg) []event.RaceMsg {
		switch m.Op {
		case event.RaceArm:
			return []event.RaceMsg{{Op: event.RaceArmed}, {Op: event.RaceStopped, Insn: "90"}}
		case event.RaceRelease:
			return []event.RaceMsg{{Op: event.RaceReleased, Late: true}}
		}
		return []event.RaceMsg{{Op: event.RaceError, Msg: "unexpected " + m.Op}}
	})
	if err := p.Arm(event.RaceMsg{Addr: 0x1000, Size: 1, CPU: 1}); err != nil {
		t.Fatal(err)
	}
	if m := <-seen; m.Op != event.RaceArm || m.Addr != 0x1000 || m.CPU != 1 {
		t.Errorf("the host got %+v, want an arm at 0x1000 on CPU 1", m)
	}
	if m, err := p.Expect(Reply, event.RaceStopped, event.RaceTimeout); err != nil || m.Insn != "90" {
		t.Fatalf("Expect = %+v, %v", m, err)
	}
	m, err := p.Release(1)
	if err != nil || !m.Late {
		t.Errorf("Release = %+v, %v; want released, late", m, err)
	}
}

func TestHostErrorAndWrongAnswer(t *testing.T) {
	p, _ := host(t, func(m event.RaceMsg) []event.RaceMsg {
		if m.Op == event.RaceArm {
			return []event.RaceMsg{{Op: event.RaceError, Msg: "no stub"}}
		}
		return []event.RaceMsg{{Op: event.RaceStopped}}
	})
	var h *HostError
	if err := p.Arm(event.RaceMsg{Addr: 1}); !errors.As(err, &h) || h.Msg != "no stub" {
		t.Errorf("Arm of a failing host = %v, want its HostError", err)
	}
	if _, err := p.Release(0); err == nil || errors.As(err, &h) && h.Msg != "no stub" {
		t.Errorf("Release answered stopped = %v, want an error", err)
	}
}

func TestReplyTimesOut(t *testing.T) {
	p, _ := host(t, func(event.RaceMsg) []event.RaceMsg { return nil })
	start := time.Now()
	if _, err := p.Recv(50 * time.Millisecond); err == nil {
		t.Fatal("Recv with no answer returned no error")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Recv waited %v for a 50 ms deadline", time.Since(start))
	}
}

// ReadText asks again while the host cannot read (a vCPU in firmware),
// up to its tries; Peek asks once.
func TestPeekAndReadText(t *testing.T) {
	unreadable := 2
	p, seen := host(t, func(m event.RaceMsg) []event.RaceMsg {
		if unreadable > 0 {
			unreadable--
			return []event.RaceMsg{{Op: event.RacePeeked, Msg: "Cannot access memory"}}
		}
		return []event.RaceMsg{{Op: event.RacePeeked, Insn: "0f1f440000"}}
	})
	if _, err := p.Peek(0x10, 5); !errors.Is(err, ErrUnreadable) {
		t.Errorf("Peek of unreadable bytes = %v, want ErrUnreadable", err)
	}
	<-seen
	b, err := p.ReadText(0x10, 5)
	if err != nil || len(b) != 5 || b[0] != 0x0f {
		t.Errorf("ReadText = % x, %v; want the bytes after one retry", b, err)
	}
	if n := len(seen); n != 2 {
		t.Errorf("ReadText asked %d times, want 2 (one unreadable, then the bytes)", n)
	}

	never, _ := host(t, func(event.RaceMsg) []event.RaceMsg {
		return []event.RaceMsg{{Op: event.RacePeeked, Msg: "Cannot access memory"}}
	})
	if _, err := never.ReadText(0x10, 5); !errors.Is(err, ErrUnreadable) {
		t.Errorf("ReadText never readable = %v, want ErrUnreadable after %d tries", err, textTries)
	}
}
