// Package tracefs reads and writes the ftrace control files under
// /sys/kernel/tracing (or an instance of it): the current tracer, the
// function filter, kprobe events and their enable switches.
//
// Every write is one open, one write(2) and one close, with the kernel's
// errno kept in the returned error: several of these files do their work on
// close (set_ftrace_filter applies the new hash when the file is released),
// so the close is part of the operation and its error is reported too.
package tracefs

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultRoot is where tracefs is mounted.
const DefaultRoot = "/sys/kernel/tracing"

// Tracer names as current_tracer takes them.
const (
	Nop           = "nop"
	Function      = "function"
	FunctionGraph = "function_graph"
)

// Files under a tracing directory.
const (
	fileTracer   = "current_tracer"
	fileFilter   = "set_ftrace_filter"
	fileKprobes  = "kprobe_events"
	fileBufferKB = "buffer_size_kb"
	dirInstances = "instances"
	dirEvents    = "events"
)

// maxEventName is MAX_EVENT_NAME_LEN (kernel/trace/trace.h): an event name
// must be shorter.
const maxEventName = 64

// maxEINTR bounds retries of an interrupted write: the Go runtime preempts
// with signals, so EINTR says nothing about tracefs.
const maxEINTR = 5

// FS is one tracing directory: the top level, or an instance, which has its
// own current_tracer, set_ftrace_filter and ring buffer.
type FS struct {
	// Root is the directory, e.g. DefaultRoot or DefaultRoot/instances/x.
	Root string
	// Index, when set, has filters name vmlinux's functions by index
	// (FuncIndex); instances share it.
	Index *FuncIndex
}

// New returns the tracing directory at root.
func New(root string) FS { return FS{Root: root} }

func (f FS) path(rel string) string { return filepath.Join(f.Root, rel) }

// write writes all of data to rel, continuing after short writes: ftrace's
// filter files parse one token per write(2) and return its length, so a
// list of functions takes several calls on one open file; flag adds O_TRUNC or
// O_APPEND. Files that accumulate commands (kprobe_events,
// set_ftrace_filter) must be opened with O_APPEND unless the caller means to
// clear them: O_TRUNC on kprobe_events removes every kprobe in the system.
func (f FS) write(rel, data string, flag int) error {
	p := f.path(rel)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC|flag, 0)
	if err != nil {
		return fmt.Errorf("tracefs: open %s: %w", p, err)
	}
	b := []byte(data)
	var werr error
	for i := 0; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR && i < maxEINTR {
			i++
			continue
		}
		if err == nil && n == 0 {
			err = fmt.Errorf("write made no progress with %d of %d bytes left", len(b), len(data))
		}
		if err != nil {
			werr = err
			break
		}
		b = b[n:]
	}
	cerr := unix.Close(fd)
	if werr != nil {
		return fmt.Errorf("tracefs: write %q to %s: %w", strings.TrimSpace(data), p, werr)
	}
	if cerr != nil {
		return fmt.Errorf("tracefs: close %s after writing %q: %w", p, strings.TrimSpace(data), cerr)
	}
	return nil
}

func (f FS) read(rel string) (string, error) {
	b, err := os.ReadFile(f.path(rel))
	if err != nil {
		return "", fmt.Errorf("tracefs: %w", err)
	}
	return string(b), nil
}

// Exists reports whether the tracing directory has a current_tracer file,
// i.e. tracefs is mounted there with the function tracer built in.
func (f FS) Exists() bool {
	_, err := os.Stat(f.path(fileTracer))
	return err == nil
}

// SetTracer writes name to current_tracer.
func (f FS) SetTracer(name string) error {
	return f.write(fileTracer, name+"\n", unix.O_TRUNC)
}

// Tracer returns the current tracer.
func (f FS) Tracer() (string, error) {
	s, err := f.read(fileTracer)
	return strings.TrimSpace(s), err
}

// SetFilter replaces set_ftrace_filter with fns in one write, applied by
// the kernel as one new hash when the file is closed. No fns clears the
// filter, which means "every function" to an active function tracer: the
// caller must switch the tracer off first.
func (f FS) SetFilter(fns ...string) error {
	toks := make([]string, len(fns))
	for i, fn := range fns {
		toks[i] = f.Index.token(fn, false)
	}
	data := strings.Join(toks, " ")
	if data != "" {
		data += "\n"
	}
	return f.write(fileFilter, data, unix.O_TRUNC)
}

// AddFilter adds fn to set_ftrace_filter, keeping what is there.
func (f FS) AddFilter(fn string) error {
	return f.write(fileFilter, f.Index.token(fn, false)+"\n", unix.O_APPEND)
}

// RemoveFilter removes fn from set_ftrace_filter. Removing the last entry
// leaves an empty filter: see SetFilter.
func (f FS) RemoveFilter(fn string) error {
	return f.write(fileFilter, f.Index.token(fn, true)+"\n", unix.O_APPEND)
}

// Filter returns the functions in set_ftrace_filter; none means the filter
// is empty (the kernel then prints a "#### all functions enabled ####"
// comment, which is skipped).
func (f FS) Filter() ([]string, error) {
	s, err := f.read(fileFilter)
	if err != nil {
		return nil, err
	}
	return ParseFilter(s), nil
}

// ParseFilter parses the text of set_ftrace_filter.
func ParseFilter(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		fl := strings.Fields(line)
		if len(fl) == 0 || strings.HasPrefix(fl[0], "#") {
			continue
		}
		out = append(out, fl[0])
	}
	return out
}

// SetBufferKB sets the per-CPU ring buffer size. Instances get a small one:
// their trace output is never read, only the callsite patching matters.
func (f FS) SetBufferKB(kb int) error {
	return f.write(fileBufferKB, fmt.Sprintf("%d\n", kb), unix.O_TRUNC)
}

// Instance creates (or reuses) the tracing instance name and returns it.
func (f FS) Instance(name string) (FS, error) {
	p := filepath.Join(f.Root, dirInstances, name)
	if err := unix.Mkdir(p, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return FS{}, fmt.Errorf("tracefs: mkdir %s: %w", p, err)
	}
	return FS{Root: p, Index: f.Index}, nil
}

// RemoveInstance removes the instance name. The kernel refuses (EBUSY)
// while the instance is in use, so the caller resets it first.
func (f FS) RemoveInstance(name string) error {
	p := filepath.Join(f.Root, dirInstances, name)
	if err := unix.Rmdir(p); err != nil {
		return fmt.Errorf("tracefs: rmdir %s: %w", p, err)
	}
	return nil
}

// Reset switches the tracer off and then empties the filter, in that order,
// so that no moment has the function tracer on with an empty filter, which
// would trace every function in the kernel.
func (f FS) Reset() error {
	var errs []error
	if err := f.SetTracer(Nop); err != nil {
		errs = append(errs, err)
	}
	if err := f.SetFilter(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Probe is one kprobe event.
type Probe struct {
	// Group and Event name it: events/<Group>/<Event>.
	Group, Event string
	// Ret makes it a kretprobe.
	Ret bool
	// Target is where it probes: a symbol, optionally "+offset".
	Target string
}

// Def is the probe's kprobe_events definition line.
func (p Probe) Def() string {
	kind := "p"
	if p.Ret {
		kind = "r"
	}
	return fmt.Sprintf("%s:%s/%s %s", kind, p.Group, p.Event, p.Target)
}

// AddProbe defines p in kprobe_events. The probe is disarmed until
// EnableEvent.
func (f FS) AddProbe(p Probe) error {
	return f.write(fileKprobes, p.Def()+"\n", unix.O_APPEND)
}

// RemoveProbe deletes a probe; the kernel refuses (EBUSY) while it is
// enabled.
func (f FS) RemoveProbe(group, event string) error {
	return f.write(fileKprobes, fmt.Sprintf("-:%s/%s\n", group, event), unix.O_APPEND)
}

// EnableEvent arms (on) or disarms an event of the top-level tracing
// directory.
func (f FS) EnableEvent(group, event string, on bool) error {
	v := "0\n"
	if on {
		v = "1\n"
	}
	return f.write(filepath.Join(dirEvents, group, event, "enable"), v, unix.O_TRUNC)
}

// Probes lists the kprobe events defined.
func (f FS) Probes() ([]Probe, error) {
	s, err := f.read(fileKprobes)
	if err != nil {
		return nil, err
	}
	return ParseProbes(s), nil
}

// ParseProbes parses kprobe_events text: "p:group/event target" or, for
// kretprobes, "r[maxactive]:group/event target", with fetch arguments after
// the target.
func ParseProbes(s string) []Probe {
	var out []Probe
	for _, line := range strings.Split(s, "\n") {
		fl := strings.Fields(line)
		if len(fl) < 2 {
			continue
		}
		kind, name, ok := strings.Cut(fl[0], ":")
		if !ok || kind == "" || (kind[0] != 'p' && kind[0] != 'r') {
			continue
		}
		group, event, ok := strings.Cut(name, "/")
		if !ok {
			continue
		}
		out = append(out, Probe{Group: group, Event: event, Ret: kind[0] == 'r', Target: fl[1]})
	}
	return out
}

// ClearProbes disarms and deletes every kprobe event of group, so that a run
// leaves no probe of its own behind whatever path it ended on. Probes of
// other groups are left alone.
func (f FS) ClearProbes(group string) error {
	ps, err := f.Probes()
	if err != nil {
		return fmt.Errorf("tracefs.ClearProbes: %w", err)
	}
	var errs []error
	for _, p := range ps {
		if p.Group != group {
			continue
		}
		if err := f.EnableEvent(p.Group, p.Event, false); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
		if err := f.RemoveProbe(p.Group, p.Event); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tracefs.ClearProbes %s: %w", group, err)
	}
	return nil
}

// EventName turns prefix+fn into a valid, unique event name: letters,
// digits and '_' only, not starting with a digit, shorter than the kernel's
// limit. A name that would be too long is cut and suffixed with a hash of
// the whole, so two long names stay distinct.
func EventName(prefix, fn string) string {
	var b strings.Builder
	for _, r := range prefix + fn {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "_" + s
	}
	if len(s) >= maxEventName {
		h := fnv.New32a()
		h.Write([]byte(prefix + fn))
		s = fmt.Sprintf("%s_%08x", s[:maxEventName-1-9], h.Sum32())
	}
	return s
}

// FilteredInstance makes the instance name under f, its function filter
// fn alone, and returns it with the function that resets and removes it.
func (f FS) FilteredInstance(name, fn string) (FS, func(), error) {
	inst, err := f.Instance(name)
	if err != nil {
		return inst, nil, fmt.Errorf("tracefs instance %s: %w", name, err)
	}
	drop := func() {
		_ = inst.Reset()
		_ = f.RemoveInstance(name)
	}
	if err := inst.SetFilter(fn); err != nil {
		drop()
		return inst, nil, fmt.Errorf("set_ftrace_filter %s: %w", fn, err)
	}
	return inst, drop, nil
}

// RecordIPs reads available_filter_functions_addrs: each traceable
// function's ftrace record address ("ip name [module]"), the key the
// direct_functions hash and a probe's ftrace_func_mapper file it under.
// The first of a name wins.
func (f FS) RecordIPs() (map[string]uint64, error) {
	b, err := f.read("available_filter_functions_addrs")
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, l := range strings.Split(b, "\n") {
		fl := strings.Fields(l)
		if len(fl) < 2 {
			continue
		}
		ip, err := strconv.ParseUint(fl[0], 16, 64)
		if err != nil {
			continue
		}
		if _, ok := out[fl[1]]; !ok {
			out[fl[1]] = ip
		}
	}
	return out, nil
}
