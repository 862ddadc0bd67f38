package tracers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
)

// MaxFilter is the most functions Mixed ever puts in a filter.
const MaxFilter = 64

// Defaults for Mixed fields left zero.
const (
	DefaultMaxProbes = 8
	DefaultMinPause  = 10 * time.Millisecond
	DefaultMaxPause  = 100 * time.Millisecond
)

// Event-name prefixes of Mixed's probes, so that they never collide with
// the churn's kprobe on the same function.
const (
	KprobePrefix    = "mix_"
	KretprobePrefix = "mixr_"
)

// Mixed toggles tracers and kprobes at random until its context ends.
type Mixed struct {
	// Top is the top-level tracing directory: kprobe_events and the event
	// enable switches live there.
	Top tracefs.FS
	// Inst is a tracing instance of Mixed's own for the function and
	// function_graph tracers, so that they never fight the churn over the
	// top level's current_tracer. Nil disables tracer toggling.
	Inst *tracefs.FS
	// Pool are the functions filters and probes are drawn from.
	Pool []string
	// Group is the kprobe group ("fth").
	Group string
	// MaxFilter caps a filter (MaxFilter if 0 or larger); MaxProbes caps
	// live probes (DefaultMaxProbes if 0).
	MaxFilter, MaxProbes int
	// MinPause and MaxPause bound the random pause between actions.
	MinPause, MaxPause time.Duration
	Rec                *tally.Recorder
	// Emit receives a Feature event when a tracer turns out unsupported.
	Emit emit.Emitter

	tracer      string // "" when off
	filter      []string
	probes      map[string]tracefs.Probe
	unsupported map[string]bool
}

// Run toggles until ctx is done, then switches its tracer off and deletes
// its probes. The error reports only a failed cleanup: failures of the
// toggles themselves are data, counted in Rec.
func (m *Mixed) Run(ctx context.Context, rng *rand.Rand) error {
	if len(m.Pool) == 0 {
		return errors.New("tracers.Mixed: empty pool")
	}
	m.defaults()
	for {
		pause := m.MinPause + time.Duration(rng.Int64N(int64(m.MaxPause-m.MinPause)+1))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return m.cleanup()
		case <-t.C:
		}
		if m.Inst != nil && rng.IntN(2) == 0 {
			m.stepTracer(rng)
		} else {
			m.stepProbe(rng)
		}
	}
}

func (m *Mixed) defaults() {
	if m.MaxFilter <= 0 || m.MaxFilter > MaxFilter {
		m.MaxFilter = MaxFilter
	}
	if m.MaxProbes <= 0 {
		m.MaxProbes = DefaultMaxProbes
	}
	if m.MinPause <= 0 {
		m.MinPause = DefaultMinPause
	}
	if m.MaxPause < m.MinPause {
		m.MaxPause = max(m.MinPause, DefaultMaxPause)
	}
	if m.probes == nil {
		m.probes = map[string]tracefs.Probe{}
	}
	if m.unsupported == nil {
		m.unsupported = map[string]bool{}
	}
}

// sample returns up to n distinct pool functions not in skip.
func (m *Mixed) sample(rng *rand.Rand, n int, skip []string) []string {
	var avail []string
	for _, fn := range m.Pool {
		if !slices.Contains(skip, fn) {
			avail = append(avail, fn)
		}
	}
	rng.Shuffle(len(avail), func(i, j int) { avail[i], avail[j] = avail[j], avail[i] })
	return avail[:min(n, len(avail))]
}

// stepTracer switches a tracer on with a fresh filter, changes the live
// filter, or switches it off.
func (m *Mixed) stepTracer(rng *rand.Rand) {
	fs := *m.Inst
	if m.tracer == "" {
		tracer := tracefs.Function
		if rng.IntN(2) == 0 && !m.unsupported[tracefs.FunctionGraph] {
			tracer = tracefs.FunctionGraph
		}
		fns := m.sample(rng, 1+rng.IntN(min(8, m.MaxFilter)), nil)
		if err := m.Rec.Time("mixed_filter_set", fns[0], func() error { return fs.SetFilter(fns...) }); err != nil {
			_ = fs.SetFilter()
			return
		}
		if got, err := fs.Filter(); err != nil || len(got) == 0 {
			m.Rec.Record("mixed_filter_set", fns[0], 0, fmt.Errorf("%w: %v", ErrEmptyFilter, err))
			return
		}
		err := m.Rec.Time("mixed_"+tracer+"_on", fns[0], func() error { return fs.SetTracer(tracer) })
		if err != nil {
			_ = fs.SetFilter()
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENODEV) {
				m.markUnsupported(tracer, err)
			}
			return
		}
		m.tracer, m.filter = tracer, fns
		return
	}
	if rng.IntN(3) > 0 {
		// Change the live filter: add first, then remove, so that it
		// is never empty while the tracer runs.
		room := m.MaxFilter - len(m.filter)
		add := m.sample(rng, min(room, 1+rng.IntN(3)), m.filter)
		for _, fn := range add {
			if m.Rec.Time("mixed_filter_add", fn, func() error { return fs.AddFilter(fn) }) == nil {
				m.filter = append(m.filter, fn)
			}
		}
		for range rng.IntN(len(m.filter)) { // leaves at least one
			i := rng.IntN(len(m.filter))
			fn := m.filter[i]
			if m.Rec.Time("mixed_filter_remove", fn, func() error { return fs.RemoveFilter(fn) }) == nil {
				m.filter = slices.Delete(m.filter, i, i+1)
			}
		}
		return
	}
	tracer := m.tracer
	_ = m.Rec.Time("mixed_"+tracer+"_off", m.filter[0], func() error { return fs.Reset() })
	m.tracer, m.filter = "", nil
}

func (m *Mixed) markUnsupported(tracer string, err error) {
	if m.unsupported[tracer] {
		return
	}
	m.unsupported[tracer] = true
	if m.Emit == nil {
		return
	}
	errno, _ := attach.ErrnoOf(err)
	_ = m.Emit.Emit(event.Event{Kind: event.KindFeature, Feature: &event.Feature{
		Name: "instance_" + tracer, Errno: errno, Msg: attach.Message(err),
	}})
}

// stepProbe adds an armed kprobe or kretprobe, or disarms and deletes one.
func (m *Mixed) stepProbe(rng *rand.Rand) {
	if len(m.probes) > 0 && (len(m.probes) >= m.MaxProbes || rng.IntN(2) == 0) {
		names := make([]string, 0, len(m.probes))
		for n := range m.probes {
			names = append(names, n)
		}
		slices.Sort(names) // map order is random; the seed must decide
		name := names[rng.IntN(len(names))]
		p := m.probes[name]
		kind := kindName(p)
		_ = m.Rec.Time("mixed_"+kind+"_disable", p.Target, func() error { return m.Top.EnableEvent(p.Group, p.Event, false) })
		if m.Rec.Time("mixed_"+kind+"_remove", p.Target, func() error { return m.Top.RemoveProbe(p.Group, p.Event) }) == nil {
			delete(m.probes, name)
		}
		return
	}
	fn := m.Pool[rng.IntN(len(m.Pool))]
	p := tracefs.Probe{Group: m.Group, Target: fn, Ret: rng.IntN(2) == 0}
	if p.Ret {
		p.Event = tracefs.EventName(KretprobePrefix, fn)
	} else {
		p.Event = tracefs.EventName(KprobePrefix, fn)
	}
	if _, dup := m.probes[p.Event]; dup {
		return
	}
	kind := kindName(p)
	if m.Rec.Time("mixed_"+kind+"_add", fn, func() error { return m.Top.AddProbe(p) }) != nil {
		return
	}
	m.probes[p.Event] = p
	_ = m.Rec.Time("mixed_"+kind+"_enable", fn, func() error { return m.Top.EnableEvent(p.Group, p.Event, true) })
}

func kindName(p tracefs.Probe) string {
	if p.Ret {
		return "kretprobe"
	}
	return "kprobe"
}

// cleanup switches the instance's tracer off and deletes Mixed's probes.
func (m *Mixed) cleanup() error {
	var errs []error
	if m.Inst != nil {
		if err := m.Inst.Reset(); err != nil {
			errs = append(errs, err)
		}
		m.tracer, m.filter = "", nil
	}
	for name, p := range m.probes {
		if err := m.Top.EnableEvent(p.Group, p.Event, false); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
		if err := m.Top.RemoveProbe(p.Group, p.Event); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(m.probes, name)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tracers.Mixed cleanup: %w", err)
	}
	return nil
}
