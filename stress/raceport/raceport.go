// Package raceport is the guest's end of the race control channel: the
// typed client of the host's conductor (harness/race) on the fth.race
// virtio-serial port, one JSON message a line (wire/event.RaceMsg).
//
// Every exchange is "ask, then expect": Arm, then Armed; Release, then
// Released; Peek, then Peeked. The waits for the host's answers are one
// table (Reply, Slack) instead of a number at every call.
package raceport

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
)

// The waits for the host, the same on every arch. The host answers at
// once what it can do itself, and bounds each hold by its own limit
// (harness/race.DefaultHoldLimit, 10 s, not scaled either).
const (
	// Reply bounds an answer the host gives as soon as it has done what
	// was asked: armed, released, peeked, untraced.
	Reply = 10 * time.Second
	// Slack is added to a wait whose length a message sets (an arm's
	// TimeoutMS, a hold's HoldMS, a trace's limit): the host's round
	// trip, a monitor tick and the gdbstub's answer.
	Slack = 10 * time.Second
	// textTries and textRetry are ReadText's retry rule.
	textTries = 5
	textRetry = 100 * time.Millisecond
)

// Port is the race channel, opened read-write.
type Port struct {
	f  *os.File
	in *bufio.Reader
}

// New reads and writes the race channel f.
func New(f *os.File) *Port { return &Port{f: f, in: bufio.NewReader(f)} }

// ErrNoPort is Open's error when the guest has no race channel: the host
// boots one only for a cell that holds vCPUs.
var ErrNoPort = errors.New("no " + event.RacePortName + " port")

// Open finds the race channel among the guest's virtio-serial ports
// (sysDir, devDir as emit.FindPort and emit.OpenPortRW take them)
// and opens it read-write.
func Open(sysDir, devDir string) (*Port, error) {
	name, err := emit.FindPort(sysDir, event.RacePortName)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoPort, err)
	}
	f, err := emit.OpenPortRW(sysDir, devDir, name)
	if err != nil {
		return nil, err
	}
	return New(f), nil
}

// Close closes the channel.
func (p *Port) Close() error { return p.f.Close() }

// HostError is the conductor's own failure (a hold past its limit, a
// stub that answered wrong): nothing the kernel did.
type HostError struct{ Msg string }

func (e *HostError) Error() string { return "race: the host: " + e.Msg }

// ErrUnreadable is a peek the host could not answer: nothing is known of
// the bytes, which is not the same as their being gone.
var ErrUnreadable = errors.New("race: the host could not read the bytes")

// Send writes one message, in one write so that it never interleaves.
func (p *Port) Send(m event.RaceMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = unix.Write(int(p.f.Fd()), append(b, '\n'))
	return err
}

// Recv reads the host's next message within d. An error message from
// the host comes back as a *HostError.
func (p *Port) Recv(d time.Duration) (event.RaceMsg, error) {
	var m event.RaceMsg
	_ = p.f.SetReadDeadline(time.Now().Add(d))
	line, err := p.in.ReadBytes('\n')
	if err != nil {
		return m, fmt.Errorf("race port: %w", err)
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("race port: %q: %w", line, err)
	}
	if m.Op == event.RaceError {
		return m, &HostError{Msg: m.Msg}
	}
	return m, nil
}

// Expect reads the host's next message within d, which must be one of
// the ops want.
func (p *Port) Expect(d time.Duration, want ...string) (event.RaceMsg, error) {
	m, err := p.Recv(d)
	if err != nil {
		return m, err
	}
	if !slices.Contains(want, m.Op) {
		return m, fmt.Errorf("race: the host answered %+v, want %v", m, want)
	}
	return m, nil
}

// Arm asks the host to stop a vCPU at m's address (m.Op is set to
// RaceArm; m.Then chains further arms) and waits until it is armed.
func (p *Port) Arm(m event.RaceMsg) error {
	m.Op = event.RaceArm
	if err := p.Send(m); err != nil {
		return err
	}
	if _, err := p.Expect(Reply, event.RaceArmed); err != nil {
		return fmt.Errorf("race: arm %#x on CPU %d: %w", m.Addr, m.CPU, err)
	}
	return nil
}

// Release lets the vCPU held for cpu go and returns the host's answer
// (Late says the task had run on before it was held).
func (p *Port) Release(cpu int) (event.RaceMsg, error) {
	if err := p.Send(event.RaceMsg{Op: event.RaceRelease, CPU: cpu}); err != nil {
		return event.RaceMsg{}, err
	}
	m, err := p.Expect(Reply, event.RaceReleased)
	if err != nil {
		return m, fmt.Errorf("race: release CPU %d: %w", cpu, err)
	}
	return m, nil
}

// Peek has the host read n bytes of kernel memory at addr, as hex, once:
// a look at a trampoline image in a window must not wait. A read the host
// could not answer is ErrUnreadable, wrapped with the host's reason.
func (p *Port) Peek(addr uint64, n int) (string, error) {
	if err := p.Send(event.RaceMsg{Op: event.RacePeek, Addr: addr, Size: n}); err != nil {
		return "", err
	}
	m, err := p.Expect(Reply, event.RacePeeked)
	if err != nil {
		return "", fmt.Errorf("race: peek %#x: %w", addr, err)
	}
	if m.Insn == "" {
		return "", fmt.Errorf("%w at %#x: %s", ErrUnreadable, addr, m.Msg)
	}
	return m.Insn, nil
}

// ReadText has the host read n bytes of kernel text at addr, decoded.
// Kernel text is always mapped, but a vCPU stopped in firmware (riscv64's
// M mode, an SBI call) translates nothing: an unreadable answer is asked
// again, textTries times in all, textRetry apart.
func (p *Port) ReadText(addr uint64, n int) ([]byte, error) {
	var h string
	var err error
	for try := 0; try < textTries; try++ {
		if try > 0 {
			time.Sleep(textRetry)
		}
		if h, err = p.Peek(addr, n); !errors.Is(err, ErrUnreadable) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("race: text at %#x: the host's %q: %w", addr, h, err)
	}
	return b, nil
}
