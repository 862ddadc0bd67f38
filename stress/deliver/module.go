// Package deliver is the delivery oracle's guest half: it drives
// fth_deliver.ko (stress/kmod-deliver), whose caller kthreads number every
// call of fth_deliver_seq and whose users record the numbers they receive,
// reads what the module judged, and names the transition in flight when a
// call went missing. Run is the oracle as the churn runs it beside its
// own, with the users the agent attaches itself (BPF programs, tracers,
// the fth_klp.ko livepatch).
//
// The rule is the module's: every call made while a user was fully
// attached, from its attach returning to its detach starting, reaches it
// exactly once, whatever other users do to the callsite meanwhile.
package deliver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The module and what it offers.
const (
	ModuleName = "fth_deliver"
	DefaultDir = "/sys/kernel/debug/fth_deliver"
	// FuncSeq is the function every user counts; FuncOther is the one an
	// ops user's filter change adds and removes (ops-multi always has it).
	FuncSeq   = "fth_deliver_seq"
	FuncOther = "fth_deliver_other"
	// UserLivepatch is the module's external user that fth_klp.ko's
	// livepatch of FuncSeq reports to.
	UserLivepatch = "livepatch"
)

// Module is a loaded fth_deliver.ko, reached through its debugfs files.
type Module struct {
	Dir string
}

func (m Module) ctl(cmd string) error {
	f, err := os.OpenFile(filepath.Join(m.Dir, "ctl"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(cmd)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("%s: %w", cmd, werr)
	}
	return cerr
}

// Run starts (true) or stops the caller kthreads.
func (m Module) Run(on bool) error {
	if on {
		return m.ctl("run 1")
	}
	return m.ctl("run 0")
}

// Attach and Detach attach and detach one of the module's users.
func (m Module) Attach(user string) error { return m.ctl("attach " + user) }

// Detach detaches user; the module judges its window as it does.
func (m Module) Detach(user string) error { return m.ctl("detach " + user) }

// External runs one half of an external user's attach or detach (a user
// another module carries, which the agent loads and unloads: livepatch):
// half is "attach-begin", "attach-end", "attach-abort", "detach-begin" or
// "detach-end". The module opens the user's window at attach-end and
// closes it at detach-begin, as it does around its own users' attaches.
func (m Module) External(user, half string) error { return m.ctl(half + " " + user) }

// Filter adds FuncOther to an ops user's filter, or removes it.
func (m Module) Filter(user string, add bool) error {
	if add {
		return m.ctl("filter add " + user)
	}
	return m.ctl("filter remove " + user)
}

// Modify moves the direct user to its other trampoline
// (modify_ftrace_direct); its window stays open.
func (m Module) Modify(user string) error { return m.ctl("modify " + user) }

// Check makes the module judge every attached user's window so far: a
// miss is reported as it happens, not at the user's detach.
func (m Module) Check() error { return m.ctl("check") }

// Sabotage makes every module user drop one call in n (0: none): the
// test-only proof that the oracle can fail.
func (m Module) Sabotage(n int) error { return m.ctl("sabotage " + strconv.Itoa(n)) }

// Begin and End log a transition made outside the module (a BPF attach, a
// tracer switched on), so that a miss during it can be put down to it.
// Names must be unique among transitions in flight.
func (m Module) Begin(name string) error { return m.ctl("begin " + name) }

// End closes the transition Begin opened.
func (m Module) End(name string) error { return m.ctl("end " + name) }

func (m Module) read(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(m.Dir, name))
}

// Calls reads every caller's counters.
func (m Module) Calls() (Calls, error) {
	b, err := m.read("calls")
	if err != nil {
		return nil, err
	}
	return ParseCalls(string(b))
}

// Findings drains what the module has judged since the last read.
func (m Module) Findings() ([]Finding, error) {
	b, err := m.read("findings")
	if err != nil {
		return nil, err
	}
	return ParseFindings(string(b))
}

// Transitions drains the transitions that ended since the last read.
func (m Module) Transitions() ([]Transition, error) {
	b, err := m.read("transitions")
	if err != nil {
		return nil, err
	}
	return ParseTransitions(string(b))
}

// Users reads the module's users and their totals.
func (m Module) Users() ([]User, error) {
	b, err := m.read("users")
	if err != nil {
		return nil, err
	}
	return ParseUsers(string(b))
}

// Caller is one caller kthread's counters: Started is the number of its
// last call begun, Done of its last call returned.
type Caller struct {
	Started, Done uint64
}

// Calls are the callers' counters, indexed by caller.
type Calls []Caller

// ParseCalls parses the module's calls file: "<caller> <started> <done>".
func ParseCalls(s string) (Calls, error) {
	var out Calls
	for _, line := range lines(s) {
		var c int
		var cl Caller
		if _, err := fmt.Sscanf(line, "%d %d %d", &c, &cl.Started, &cl.Done); err != nil || c != len(out) {
			return nil, fmt.Errorf("deliver: calls line %q", line)
		}
		out = append(out, cl)
	}
	return out, nil
}

// User is a line of the module's users file.
type User struct {
	Name string
	Live bool
	// External says another module carries the user: the agent attaches
	// it between External's halves, never with Attach.
	External bool
	Attaches uint64
	// Checked counts the calls judged at detach; Failed the windows with
	// a finding.
	Checked, Failed uint64
	// Dropped counts calls the sabotage dropped; NoArgs callbacks without
	// arguments (an arch without ftrace_regs arguments).
	Dropped, NoArgs uint64
	// Skip says why the kernel cannot provide the user ("" if it can).
	Skip string
}

// ParseUsers parses the users file.
func ParseUsers(s string) ([]User, error) {
	var out []User
	for _, line := range lines(s) {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("deliver: users line %q", line)
		}
		u := User{Name: f[0]}
		// skip= is last and runs to the end of the line: its reason has
		// spaces.
		if i := strings.Index(line, " skip="); i >= 0 {
			if u.Skip = line[i+len(" skip="):]; u.Skip == "-" {
				u.Skip = ""
			}
			f = strings.Fields(line[:i])
		}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("deliver: users line %q: %q", line, kv)
			}
			n, _ := strconv.ParseUint(v, 10, 64)
			switch k {
			case "live":
				u.Live = v == "1"
			case "external":
				u.External = v == "1"
			case "attaches":
				u.Attaches = n
			case "checked":
				u.Checked = n
			case "failed":
				u.Failed = n
			case "dropped":
				u.Dropped = n
			case "noargs":
				u.NoArgs = n
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// Span is the calls of one caller a transition may have overlapped:
// numbers above BeginDone (not yet returned when it began) up to
// EndStarted (begun by the time it ended).
type Span struct {
	BeginDone, EndStarted uint64
}

// Transition is a change to the callsite, logged by the module.
type Transition struct {
	ID   uint64
	Name string
	Span []Span
}

// Overlaps says whether calls from..to of caller might have run during t.
func (t Transition) Overlaps(caller int, from, to uint64) bool {
	if caller < 0 || caller >= len(t.Span) {
		return false
	}
	s := t.Span[caller]
	return from <= s.EndStarted && to > s.BeginDone
}

// ParseTransitions parses the transitions file: "<id> <done:started>...
// <name>", one span per caller.
func ParseTransitions(s string) ([]Transition, error) {
	var out []Transition
	for _, line := range lines(s) {
		if strings.HasPrefix(line, "lost ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("deliver: transitions line %q", line)
		}
		id, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("deliver: transitions line %q: %w", line, err)
		}
		t := Transition{ID: id}
		i := 1
		for ; i < len(f); i++ {
			a, b, ok := strings.Cut(f[i], ":")
			if !ok {
				break
			}
			x, err1 := strconv.ParseUint(a, 10, 64)
			y, err2 := strconv.ParseUint(b, 10, 64)
			if err1 != nil || err2 != nil {
				break
			}
			t.Span = append(t.Span, Span{BeginDone: x, EndStarted: y})
		}
		t.Name = strings.Join(f[i:], " ")
		out = append(out, t)
	}
	return out, nil
}

// CallsiteLine returns FuncSeq's line of tracefs's enabled_functions
// (its ops count, flags, the ops or trampoline it calls), "" if it has
// none: nothing attached.
func CallsiteLine(enabled string) string {
	for _, l := range lines(enabled) {
		if strings.HasPrefix(l, FuncSeq+" ") || strings.HasPrefix(l, FuncSeq+"\t") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return ""
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
