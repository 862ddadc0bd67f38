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

	"github.com/ftrace-harness/fth/harness/machine"
	"github.com/ftrace-harness/fth/results"
)

// eventBuffer holds lines read but not yet taken by the monitor, so that a
// monitor draining after Close still gets the guest's last words.
const eventBuffer = 4096

// readersGrace bounds how long Close waits for the console and agent
// readers to reach the end of their streams once QEMU is gone.
const readersGrace = 2 * time.Second

// Instance is a running VM as a machine.Instance: its serial console, its
// agent channel and QMP's reset and exit, in one ordered stream. The VM's
// own methods (Pause, Sysrq, ShutdownReason, TripleFault, Stderr, Kill) are
// the optional target capabilities the monitor asserts.
type Instance struct {
	*VM
	events   chan machine.Event
	stop     chan struct{}
	stopOnce sync.Once
	readers  sync.WaitGroup
}

var (
	_ machine.Instance       = (*Instance)(nil)
	_ machine.Pauser         = (*Instance)(nil)
	_ machine.Sysrqer        = (*Instance)(nil)
	_ machine.ResetExplainer = (*Instance)(nil)
	_ machine.Stderrer       = (*Instance)(nil)
)

// NewInstance starts reading vm's streams.
func NewInstance(vm *VM) *Instance {
	i := &Instance{VM: vm, events: make(chan machine.Event, eventBuffer), stop: make(chan struct{})}
	i.readers.Add(2)
	go i.read(vm.Console(), machine.Console)
	go i.read(vm.Agent(), machine.Agent)
	readersDone := make(chan struct{})
	go func() { i.readers.Wait(); close(readersDone) }()
	var senders sync.WaitGroup
	senders.Add(2)
	go func() {
		defer senders.Done()
		select {
		case <-vm.GuestReset():
			i.send(machine.Event{Kind: machine.Reset})
		case <-readersDone:
		case <-i.stop:
		}
	}()
	go func() {
		defer senders.Done()
		// The console closes when QEMU exits, the agent socket too; the
		// exit itself comes after.
		select {
		case <-readersDone:
		case <-i.stop:
			return
		}
		select {
		case <-vm.Exited():
			i.send(machine.Event{Kind: machine.Exited, Err: vm.ExitError()})
		case <-i.stop:
		}
	}()
	go func() { senders.Wait(); close(i.events) }()
	return i
}

// Events implements machine.Instance.
func (i *Instance) Events() <-chan machine.Event { return i.events }

// Diagnose implements machine.Instance: every vCPU's registers and the top
// of its stack (see VM.CPUState), whatever the report. They come from QEMU,
// not the console, so there is nothing to wait for; a hung VM's sysrq
// answers come through its Sysrqer.
func (i *Instance) Diagnose(ctx context.Context, _ *results.Finding) machine.Diagnosis {
	return machine.Diagnosis{File: results.RegistersFile, Text: i.VM.CPUState(ctx)}
}

// Close quits QEMU and lets the readers deliver what the guest said last.
func (i *Instance) Close() error {
	err := i.VM.Close()
	done := make(chan struct{})
	go func() { i.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(readersGrace):
	}
	i.stopOnce.Do(func() { close(i.stop) })
	return err
}

func (i *Instance) send(e machine.Event) {
	select {
	case i.events <- e:
	case <-i.stop:
	}
}

func (i *Instance) read(r io.Reader, kind machine.Kind) {
	defer i.readers.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		i.send(machine.Event{Kind: kind, Text: strings.TrimRight(sc.Text(), "\r")})
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		i.send(machine.Event{Kind: machine.Console, Text: fmt.Sprintf("fth: reading the %s stream: %v", kind, err)})
	}
}
