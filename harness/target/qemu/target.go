package qemu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/harness/target"
	"github.com/ftrace-harness/fth/results"
)

// eventBuffer holds lines read but not yet taken by the monitor, so that a
// monitor draining after Close still gets the guest's last words.
const eventBuffer = 4096

// readersGrace bounds how long Close waits for the console and agent
// readers to reach the end of their streams once QEMU is gone.
const readersGrace = 2 * time.Second

// Target is a running VM as a target.Instance: its serial console, its agent
// channel and QMP's reset and exit, in one ordered stream. The VM's own
// methods (Pause, ShutdownReason, TripleFault, Stderr, Kill) are the
// optional target capabilities.
type Target struct {
	*Instance
	events   chan target.Event
	stop     chan struct{}
	stopOnce sync.Once
	readers  sync.WaitGroup
}

var (
	_ target.Instance       = (*Target)(nil)
	_ target.Pauser         = (*Target)(nil)
	_ target.ResetExplainer = (*Target)(nil)
	_ target.Stderrer       = (*Target)(nil)
)

// NewTarget starts reading vm's streams.
func NewTarget(vm *Instance) *Target {
	t := &Target{Instance: vm, events: make(chan target.Event, eventBuffer), stop: make(chan struct{})}
	t.readers.Add(2)
	go t.read(vm.Console(), target.Console)
	go t.read(vm.Agent(), target.Agent)
	readersDone := make(chan struct{})
	go func() { t.readers.Wait(); close(readersDone) }()
	var senders sync.WaitGroup
	senders.Add(2)
	go func() {
		defer senders.Done()
		select {
		case <-vm.GuestReset():
			t.send(target.Event{Kind: target.Reset})
		case <-readersDone:
		case <-t.stop:
		}
	}()
	go func() {
		defer senders.Done()
		// The console closes when QEMU exits, the agent socket too; the
		// exit itself comes after.
		select {
		case <-readersDone:
		case <-t.stop:
			return
		}
		select {
		case <-vm.Exited():
			t.send(target.Event{Kind: target.Exited, Err: vm.ExitError()})
		case <-t.stop:
		}
	}()
	go func() { senders.Wait(); close(t.events) }()
	return t
}

// Events implements target.Instance.
func (t *Target) Events() <-chan target.Event { return t.events }

// Diagnose implements target.Instance: every vCPU's registers and the top
// of its stack (see Instance.Diagnose).
func (t *Target) Diagnose(ctx context.Context) (string, string) {
	return results.RegistersFile, t.Instance.Diagnose(ctx)
}

// Close quits QEMU and lets the readers deliver what the guest said last.
func (t *Target) Close() error {
	err := t.Instance.Close()
	done := make(chan struct{})
	go func() { t.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(readersGrace):
	}
	t.stopOnce.Do(func() { close(t.stop) })
	return err
}

func (t *Target) send(e target.Event) {
	select {
	case t.events <- e:
	case <-t.stop:
	}
}

func (t *Target) read(r io.Reader, kind target.Kind) {
	defer t.readers.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		t.send(target.Event{Kind: kind, Text: strings.TrimRight(sc.Text(), "\r")})
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		t.send(target.Event{Kind: target.Console, Text: fmt.Sprintf("fth: reading the %s stream: %v", kind, err)})
	}
}
