package tally

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
)

func TestRecorder(t *testing.T) {
	var m emit.Memory
	r := New(&m, 2)
	clock := time.Unix(0, 0)
	r.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }

	for i := range 5 {
		err := r.Time("kprobe_on", fmt.Sprintf("f%d", i), func() error {
			if i%2 == 0 {
				return fmt.Errorf("write: %w", unix.EBUSY)
			}
			return nil
		})
		if (i%2 == 0) != (err != nil) {
			t.Errorf("Time returned %v for op %d", err, i)
		}
	}
	r.Record("attach_fexit", "g", 3*time.Millisecond, errors.New("no errno"))
	r.Record("attach_fexit", "g", 5*time.Millisecond, nil)

	sums := r.Summaries()
	if len(sums) != 2 || sums[0].Name != "attach_fexit" || sums[1].Name != "kprobe_on" {
		t.Fatalf("summaries = %+v", sums)
	}
	k := sums[1]
	if k.Attempted != 5 || k.Succeeded != 2 || k.Failed != 3 || k.Errnos["EBUSY"] != 3 {
		t.Errorf("kprobe_on = %+v", k)
	}
	if k.Latency.Count != 5 || k.Latency.Max.Std() != time.Millisecond || k.Wall.Std() != 5*time.Millisecond {
		t.Errorf("kprobe_on latency = %+v, wall %v", k.Latency, k.Wall)
	}
	a, ok := r.Get("attach_fexit")
	if !ok || a.Errnos["other"] != 1 || a.Latency.Median.Std() != 3*time.Millisecond || a.Wall.Std() != 8*time.Millisecond {
		t.Errorf("attach_fexit = %+v", a)
	}
	if _, ok := r.Get("none"); ok {
		t.Error("Get found an unrecorded name")
	}
	// Failure events: capped at 2 per name.
	f := m.OfKind(event.KindFailure)
	if len(f) != 3 || f[0].Failure.Phase != "kprobe_on" || f[0].Failure.Errno != "EBUSY" || f[2].Failure.Phase != "attach_fexit" {
		t.Errorf("failures = %+v", f)
	}
	if err := r.EmitSummaries(); err != nil {
		t.Fatal(err)
	}
	tr := m.OfKind(event.KindTransition)
	if len(tr) != 2 || tr[1].Transition.Name != "kprobe_on" {
		t.Errorf("transition events = %+v", tr)
	}
	// Summaries are copies: changing one does not change the recorder.
	sums[1].Errnos["EBUSY"] = 99
	if k2, _ := r.Get("kprobe_on"); k2.Errnos["EBUSY"] != 3 {
		t.Error("Summaries shares its errno map")
	}
}

func TestRecorderNoFailureEvents(t *testing.T) {
	var m emit.Memory
	r := New(&m, -1)
	r.Record("x", "f", time.Millisecond, unix.EINVAL)
	if len(m.Events()) != 0 {
		t.Errorf("events with maxFailures < 0: %+v", m.Events())
	}
	if err := New(nil, 0).EmitSummaries(); err == nil {
		t.Error("EmitSummaries without an emitter succeeded")
	}
}

func TestOpLog(t *testing.T) {
	var m emit.Memory
	r := New(&m, 0)
	clock := time.Unix(100, 0)
	r.now = func() time.Time { return clock }
	if err := r.Time("quiet", "f", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	r.LogOps(time.Unix(99, 500_000_000))
	_ = r.Time("kprobe_on", "do_sys_openat2", func() error { return nil })
	_ = r.Time("ftrace_off", "ksys_read", func() error { return unix.EBUSY })
	var ops []event.Op
	for _, e := range m.Events() {
		if e.Kind == event.KindOp {
			ops = append(ops, *e.Op)
		}
	}
	if len(ops) != 2 {
		t.Fatalf("ops = %+v, want the two operations after LogOps", ops)
	}
	for i, want := range []event.Op{{Phase: "kprobe_on", Function: "do_sys_openat2", Index: 1, AtMS: 500}, {Phase: "ftrace_off", Function: "ksys_read", Index: 2, AtMS: 500}} {
		got := ops[i]
		if got.Phase != want.Phase || got.Function != want.Function || got.Index != want.Index || got.AtMS != want.AtMS || got.CPU == nil || *got.CPU < 0 {
			t.Errorf("op %d = %+v (cpu %v), want %+v with a cpu", i, got, got.CPU, want)
		}
	}
}
