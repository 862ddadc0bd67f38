// Package tracers drives ftrace's own tracers alongside the BPF trampolines:
// a reference-counted function tracer restricted to the functions its users
// ask for (Filtered), and a goroutine that toggles tracers, filters and
// kprobes at random (Mixed). Both only ever trace a named set of functions:
// an empty set_ftrace_filter means "every function", which under TCG slows
// the guest to a crawl.
package tracers

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ftrace-harness/fth/stress/tracefs"
)

// ErrEmptyFilter means the kernel's filter did not show the function just
// written, so the tracer was not switched on: on an empty filter it would
// trace everything.
var ErrEmptyFilter = errors.New("set_ftrace_filter does not list the function after writing it")

// Filtered keeps one tracer on in a tracing directory, with
// set_ftrace_filter holding exactly the functions that have users. Several
// churn workers share it: each Add of a function must be matched by a
// Remove. It is safe for concurrent use.
type Filtered struct {
	fs     tracefs.FS
	tracer string

	mu    sync.Mutex
	users map[string]int
	on    bool
}

// NewFiltered returns a Filtered for tracer (tracefs.Function or
// tracefs.FunctionGraph) in fs, which the caller has reset.
func NewFiltered(fs tracefs.FS, tracer string) *Filtered {
	return &Filtered{fs: fs, tracer: tracer, users: map[string]int{}}
}

// Add makes fn traced. The first user switches the tracer on, after
// writing and reading back the filter; later ones extend the live filter,
// which the kernel applies as one hash update (callsites of fn patched, the
// others untouched).
func (f *Filtered) Add(fn string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.users[fn] > 0 {
		f.users[fn]++
		return nil
	}
	if !f.on {
		if err := f.fs.SetFilter(fn); err != nil {
			return fmt.Errorf("tracers.Filtered.Add %s: %w", fn, err)
		}
		got, err := f.fs.Filter()
		if err != nil || !slices.Contains(got, fn) {
			_ = f.fs.SetFilter()
			return fmt.Errorf("tracers.Filtered.Add %s: %w (read %v, %v)", fn, ErrEmptyFilter, got, err)
		}
		if err := f.fs.SetTracer(f.tracer); err != nil {
			_ = f.fs.SetFilter()
			return fmt.Errorf("tracers.Filtered.Add %s: %w", fn, err)
		}
		f.on = true
	} else if err := f.fs.AddFilter(fn); err != nil {
		return fmt.Errorf("tracers.Filtered.Add %s: %w", fn, err)
	}
	f.users[fn] = 1
	return nil
}

// Remove drops one user of fn. The last user of the last function switches
// the tracer off before emptying the filter; otherwise fn leaves the live
// filter, which stays non-empty.
func (f *Filtered) Remove(fn string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.users[fn]
	switch {
	case n == 0:
		return fmt.Errorf("tracers.Filtered.Remove %s: not added", fn)
	case n > 1:
		f.users[fn]--
		return nil
	}
	delete(f.users, fn)
	if len(f.users) == 0 {
		f.on = false
		if err := f.fs.Reset(); err != nil {
			return fmt.Errorf("tracers.Filtered.Remove %s: %w", fn, err)
		}
		return nil
	}
	if err := f.fs.RemoveFilter(fn); err != nil {
		return fmt.Errorf("tracers.Filtered.Remove %s: %w", fn, err)
	}
	return nil
}

// Active returns the functions with users, sorted.
func (f *Filtered) Active() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.users))
	for fn := range f.users {
		out = append(out, fn)
	}
	slices.Sort(out)
	return out
}

// Close switches the tracer off and empties the filter, whatever users
// remain.
func (f *Filtered) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users = map[string]int{}
	f.on = false
	if err := f.fs.Reset(); err != nil {
		return fmt.Errorf("tracers.Filtered.Close: %w", err)
	}
	return nil
}
