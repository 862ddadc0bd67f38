package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/harness/machine"
	"github.com/ftrace-harness/fth/harness/machine/ssh"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// board is a board under soak as a machine.Instance. What is truly a
// board's stays here: deploying the agent, streaming /dev/kmsg, telling a
// network blip from a reboot by boot_id, reading pstore and the previous
// boot's journal, resuming. Watchdogs, findings and the verdict are the
// monitor's.
type board struct {
	s      *soak
	events chan machine.Event
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

var _ machine.Instance = (*board)(nil)

// newBoard starts deploying and running the agent on the board s is
// connected to.
func newBoard(ctx context.Context, s *soak) *board {
	ctx, cancel := context.WithCancel(ctx)
	b := &board{s: s, events: make(chan machine.Event, 256), cancel: cancel, done: make(chan struct{})}
	s.emit = func(e machine.Event) {
		select {
		case b.events <- e:
		case <-ctx.Done():
		}
	}
	go func() {
		defer close(b.done)
		defer close(b.events)
		b.run(ctx)
	}()
	return b
}

// Events implements machine.Instance.
func (b *board) Events() <-chan machine.Event { return b.events }

// Diagnose implements machine.Instance: for a hang (or no report), the
// blocked tasks, by sysrq w over SSH, which the kernel log stream carries
// back into console.log, so the monitor waits for it before it explains
// the hang; and the agent's threads with their kernel stacks, while the
// connection still answers. Another report has its own stacks.
func (b *board) Diagnose(ctx context.Context, rep *results.Finding) machine.Diagnosis {
	c := b.s.client()
	var out strings.Builder
	wait := false
	if rep == nil || rep.Kind.Hang() {
		if _, err := c.Output(ctx, "printf w > /proc/sysrq-trigger"); err != nil {
			fmt.Fprintf(&out, "sysrq w: %v\n", err)
		} else {
			out.WriteString("sysrq w: blocked tasks dumped to the kernel log (console.log)\n")
			wait = true
		}
	}
	if pid := b.s.agentPID.Load(); pid > 0 {
		cmd := fmt.Sprintf(`for t in /proc/%d/task/*; do echo "== $t $(cat $t/comm) wchan=$(cat $t/wchan)"; cat $t/stack; done`, pid)
		o, err := c.Output(ctx, cmd)
		out.Write(o)
		if err != nil {
			fmt.Fprintf(&out, "agent task stacks: %v\n", err)
		}
	}
	return machine.Diagnosis{File: results.TasksFile, Text: out.String(), Wait: wait}
}

// Kill stops the agent on the board and everything reading from it.
func (b *board) Kill() {
	if pid := b.s.agentPID.Load(); pid > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = b.s.client().Output(ctx, fmt.Sprintf("kill -9 %d", pid))
		cancel()
	}
	b.cancel()
}

// Close implements machine.Instance.
func (b *board) Close() error {
	b.once.Do(func() {
		b.cancel()
		select {
		case <-b.done:
		case <-time.After(15 * time.Second):
		}
		_ = b.s.client().Close()
	})
	return nil
}

// run deploys and runs the agent until the soak's time is used up or the
// board is gone, surviving blips, and reboots when asked to resume.
func (b *board) run(ctx context.Context) {
	s := b.s
	first := true
	var crashAt <-chan time.Time
	if s.cfg.CrashAfter > 0 {
		t := time.NewTimer(s.cfg.CrashAfter)
		defer t.Stop()
		crashAt = t.C
	}
	for {
		left := s.cfg.Duration - time.Since(s.start)
		if left <= 0 {
			s.emit(machine.Event{Kind: machine.Exited})
			return
		}
		remote, err := s.deploy(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.emit(machine.Event{Kind: machine.Exited, Err: err})
			}
			return
		}
		seg, err := s.segment(ctx, remote, left, first, &crashAt)
		first = false
		switch seg {
		case segLost:
			s.emit(machine.Event{Kind: machine.Lost, Err: err})
			if !s.comeback(ctx) {
				return
			}
		case segEnded:
			s.emit(machine.Event{Kind: machine.Exited, Err: err})
			return
		default: // interrupted: the monitor is done with us
			return
		}
	}
}

// segmentEnd is how one agent run on one connection ended.
type segmentEnd int

const (
	segEnded       segmentEnd = iota // the agent exited (after done, or not)
	segLost                          // the connection dropped
	segInterrupted                   // ctx ended
)

// segment runs the kmsg stream and one agent until the agent exits, the
// connection drops, or ctx ends.
func (s *soak) segment(ctx context.Context, remote string, left time.Duration, first bool, crashAt *<-chan time.Time) (segmentEnd, error) {
	c := s.client()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// History: on the first connection the kernel log already holds the
	// boot and whatever ran before us; it goes to console.log but not to
	// the detector. After a reboot, the new boot is all ours.
	var since uint64
	if first {
		if up, err := c.Output(ctx, "cat /proc/uptime"); err == nil {
			if f := strings.Fields(string(up)); len(f) > 0 {
				if sec, err := strconv.ParseFloat(f[0], 64); err == nil {
					since = uint64(sec * 1e6)
				}
			}
		}
	}
	var wg sync.WaitGroup
	// The kernel log reader must be done before a new boot resets the
	// log's numbering; bounded, as a dead connection's stream may be slow
	// to notice.
	defer func() {
		cancel()
		waitTimeout(&wg, 10*time.Second)
	}()
	s.agentPID.Store(0)
	s.kmsgPID.Store(0)
	kr, kw := io.Pipe()
	// The agent streams the kernel log rather than `cat /dev/kmsg`: like
	// the stress, it stops when its stdin (a pipe never written) sees the
	// session drop. A cat would outlive a harness killed mid-soak on an
	// sshd that keeps its output pipe open (u-root's), blocked on writes.
	kin, kinW := io.Pipe()
	defer kinW.Close()
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := c.Stream(sctx, kmsgCommand(remote), kin, kw, io.Discard)
		kw.CloseWithError(err)
	}()
	go func() {
		defer wg.Done()
		s.consumeKmsg(kr, since)
	}()

	args := s.cfg.Agent.Given()
	if s.cfg.Agent.Options().Scenario == event.ScenarioChurn {
		args["churn"] = left.Round(time.Second).String()
	}
	cmd := agentCommand(remote, args)
	s.log.Info("starting agent", "cmd", cmd)
	ar, aw := io.Pipe()
	// The agent's stdin is a pipe we never write: it sees EOF only when the
	// session drops, and stops itself (the session mode).
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stderr bytes.Buffer
	agentErr := make(chan error, 1)
	go func() {
		err := c.Stream(sctx, cmd, stdinR, aw, &lockedWriter{w: &stderr})
		aw.CloseWithError(err)
		agentErr <- err
	}()
	doneSeen := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		s.readAgent(ar, func() {
			close(doneSeen)
			// End the agent's stdin: an sshd that copies it into a pipe
			// (u-root's) waits for its end before it reports the exit and
			// closes the session.
			stdinW.Close()
		})
	}()

	lost := c.Done()
	for {
		select {
		case err := <-agentErr:
			<-readDone
			select {
			case <-doneSeen:
				return segEnded, nil
			default:
			}
			if errors.Is(err, ssh.ErrConnLost) {
				return segLost, err
			}
			select {
			case <-lost:
				return segLost, errors.New("connection lost")
			case <-time.After(2 * time.Second):
			}
			return segEnded, fmt.Errorf("the agent exited without reporting done: %v; stderr: %s", err, tail(stderr.String(), 400))
		case <-lost:
			return segLost, errors.New("connection lost")
		case <-*crashAt:
			*crashAt = nil
			s.log.Warn("injecting a board panic (sysrq-c), as asked", "after", s.cfg.CrashAfter)
			go func() {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				defer ccancel()
				_, _ = c.Output(cctx, "echo c > /proc/sysrq-trigger")
			}()
		case <-ctx.Done():
			return segInterrupted, ctx.Err()
		}
	}
}

// readAgent passes the agent's event lines on, noting its pid from the
// hello (to stop a stale agent after a blip) and calling onDone at done.
func (s *soak) readAgent(r io.Reader, onDone func()) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		var ev event.Event
		if json.Unmarshal([]byte(line), &ev) == nil {
			switch {
			case ev.Kind == event.KindHello && ev.Hello != nil:
				s.agentPID.Store(int64(ev.Hello.PID))
			case ev.Kind == event.KindDone && onDone != nil:
				onDone()
				onDone = nil
			}
		}
		s.emit(machine.Event{Kind: machine.Agent, Text: line})
	}
}

// consumeKmsg passes every kernel log record on as a console line, those
// before since (µs since boot) as history the detector does not see.
func (s *soak) consumeKmsg(r io.Reader, since uint64) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if pid, ok := strings.CutPrefix(sc.Text(), event.KmsgStreamPIDPrefix); ok {
			if n, err := strconv.ParseInt(pid, 10, 64); err == nil {
				s.kmsgPID.Store(n)
			}
			continue
		}
		rec, ok := parseKmsg(sc.Text())
		next := s.kmsgNext.Load()
		if !ok || rec.Seq < next {
			continue
		}
		if next > 0 && rec.Seq > next {
			// The ring buffer overwrote records before they were read
			// (a burst, or a blip): say so where they would have been.
			s.emit(machine.Event{Kind: machine.Console, History: true, Text: fmt.Sprintf("---- fth: %d kernel log records lost (overwritten before they were read) ----", rec.Seq-next)})
		}
		s.kmsgNext.Store(rec.Seq + 1)
		s.emit(machine.Event{Kind: machine.Console, Text: rec.Line(), History: rec.TSus < since})
	}
}

// comeback waits for a lost board and tells the monitor how it came back.
// It returns whether the soak goes on.
func (s *soak) comeback(ctx context.Context) bool {
	at := time.Since(s.start).Seconds()
	s.log.Warn("connection to the board lost; waiting for it to come back", "target", s.cfg.SSH.Addr)
	_ = s.client().Close()
	dial := func(ctx context.Context) (*ssh.Client, error) { return ssh.Dial(ctx, s.cfg.SSH) }
	c, cb, err := ssh.WaitBack(ctx, s.bootID, s.cfg.Backoff, dial, s.log)
	rc := results.Reconnect{At: at, Rebooted: cb.Rebooted, Back: err == nil, Tries: cb.Tries, Waited: cb.Waited.Seconds()}
	if err != nil {
		rc.Err = err.Error()
	}
	_ = s.w.Update(func(r *results.Result) { r.Board.Reconnects = append(r.Board.Reconnects, rc) })
	if err != nil {
		if ctx.Err() == nil {
			s.emit(machine.Event{Kind: machine.Unreachable, Err: err})
		}
		return false
	}
	s.setClient(c)
	if !cb.Rebooted {
		s.log.Info("board back, same boot: a network blip", "waited", cb.Waited.Round(time.Second))
		stale := s.stopStaleAgent(ctx)
		_ = s.w.Update(func(r *results.Result) {
			r.Board.Reconnects[len(r.Board.Reconnects)-1].StaleAgent = stale
		})
		s.emit(machine.Event{Kind: machine.Back})
		return true
	}
	s.log.Warn("board rebooted", "old_boot_id", s.bootID, "new_boot_id", cb.BootID, "waited", cb.Waited.Round(time.Second))
	s.bootID = cb.BootID
	s.kmsgNext.Store(0) // a new boot numbers its records from 0; the pids reset when the next segment starts
	_ = s.w.Update(func(r *results.Result) { r.Board.BootIDs = append(r.Board.BootIDs, cb.BootID) })
	fs := s.collectPstore(ctx)
	fs = append(fs, s.collectPrevBoot(ctx)...)
	resume := s.cfg.Resume && s.cfg.Duration > time.Since(s.start)
	s.emit(machine.Event{Kind: machine.Rebooted, BootID: cb.BootID, Findings: fs, Resumed: resume})
	return resume
}
