// Package preempt switches the kernel's preemption model at run time through
// /sys/kernel/debug/sched/preempt (PREEMPT_DYNAMIC). A switch rewrites static
// calls and static keys all over the kernel — text patching of its own —
// which is why the churn scenario does it while trampolines come and go.
package preempt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/wire/event"
)

// DefaultPath is the PREEMPT_DYNAMIC control file.
const DefaultPath = "/sys/kernel/debug/sched/preempt"

// Known lists every model any kernel has offered. Probing tries these too,
// not only what the file lists, so that a run records the kernel refusing
// (Linux 7.3 hides and rejects none and voluntary on arches with
// PREEMPT_LAZY) rather than silently never asking.
var Known = []string{"none", "voluntary", "full", "lazy"}

// Transition names recorded in the Recorder.
const (
	OpSwitch  = "preempt_switch"
	OpRestore = "preempt_restore"
)

// Models is the content of the control file.
type Models struct {
	// Offered lists the models in the order the file shows them.
	Offered []string
	// Current is the selected one (in parentheses), "" if none is marked.
	Current string
}

// Parse parses the control file, e.g. "none voluntary (full) lazy".
func Parse(s string) Models {
	var m Models
	for _, f := range strings.Fields(s) {
		if len(f) > 2 && f[0] == '(' && f[len(f)-1] == ')' {
			f = f[1 : len(f)-1]
			m.Current = f
		}
		m.Offered = append(m.Offered, f)
	}
	return m
}

// Switcher probes and switches models.
type Switcher struct {
	// Read returns the control file's content; Write writes a model name
	// to it and returns the kernel's error.
	Read  func() (string, error)
	Write func(model string) error
	// Rec times every switch.
	Rec *tally.Recorder

	initial  Models
	accepted []string
	rejected map[string]string
	switches int
	errnos   map[string]int
	skipped  string
}

// New returns a Switcher on the control file at path.
func New(path string, rec *tally.Recorder) *Switcher {
	return &Switcher{
		Read: func() (string, error) {
			b, err := os.ReadFile(path)
			return string(b), err
		},
		Write: func(model string) error { return writeFile(path, model+"\n") },
		Rec:   rec,
	}
}

// writeFile writes data in one write(2), keeping the errno: the kernel
// rejects a model by failing the write.
func writeFile(path, data string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	for i := 0; ; i++ {
		_, err = unix.Write(fd, []byte(data))
		if err == unix.EINTR && i < 5 {
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", strings.TrimSpace(data), path, err)
	}
	return nil
}

// Probe reads the offered models, tries every offered and known model once,
// and puts the initial one back. It returns an error only when the file
// cannot be read; refusals are data (Rejected).
func (s *Switcher) Probe() error {
	text, err := s.Read()
	if err != nil {
		s.skipped = fmt.Sprintf("no preemption control: %v", err)
		return fmt.Errorf("preempt.Probe: %w", err)
	}
	s.initial = Parse(text)
	s.rejected = map[string]string{}
	try := slices.Clone(s.initial.Offered)
	for _, k := range Known {
		if !slices.Contains(try, k) {
			try = append(try, k)
		}
	}
	for _, m := range try {
		if err := s.Write(m); err != nil {
			errno, ok := attach.ErrnoOf(err)
			if !ok {
				errno = attach.OtherErrno
			}
			s.rejected[m] = errno
			continue
		}
		s.accepted = append(s.accepted, m)
	}
	if s.initial.Current != "" {
		if err := s.Rec.Time(OpRestore, s.initial.Current, func() error { return s.Write(s.initial.Current) }); err != nil {
			return fmt.Errorf("preempt.Probe: restore %s: %w", s.initial.Current, err)
		}
	}
	if len(s.accepted) < 2 {
		s.skipped = fmt.Sprintf("fewer than two models accepted (%v)", s.accepted)
	}
	return nil
}

// Observe reads the offered models without writing anything, for a run
// that must not switch (see Disable).
func (s *Switcher) Observe() error {
	text, err := s.Read()
	if err != nil {
		s.skipped = fmt.Sprintf("no preemption control: %v", err)
		return fmt.Errorf("preempt.Observe: %w", err)
	}
	s.initial = Parse(text)
	return nil
}

// Accepted returns the models a write was accepted for.
func (s *Switcher) Accepted() []string { return slices.Clone(s.accepted) }

// Run switches to another accepted model every interval, in an order drawn
// from rng, until ctx is done, then restores the initial model. It returns
// at once if Probe found fewer than two models.
func (s *Switcher) Run(ctx context.Context, every time.Duration, rng *rand.Rand) {
	if len(s.accepted) < 2 || every <= 0 {
		return
	}
	cur := s.initial.Current
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.restore()
			return
		case <-t.C:
		}
		next := pick(s.accepted, cur, rng)
		err := s.Rec.Time(OpSwitch, next, func() error { return s.Write(next) })
		if err != nil {
			errno, ok := attach.ErrnoOf(err)
			if !ok {
				errno = attach.OtherErrno
			}
			if s.errnos == nil {
				s.errnos = map[string]int{}
			}
			s.errnos[errno]++
			continue
		}
		s.switches++
		cur = next
	}
}

// pick returns an accepted model other than cur.
func pick(accepted []string, cur string, rng *rand.Rand) string {
	others := make([]string, 0, len(accepted))
	for _, m := range accepted {
		if m != cur {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return cur
	}
	return others[rng.IntN(len(others))]
}

func (s *Switcher) restore() {
	if s.initial.Current == "" {
		return
	}
	if err := s.Rec.Time(OpRestore, s.initial.Current, func() error { return s.Write(s.initial.Current) }); err != nil {
		errno, _ := attach.ErrnoOf(err)
		if s.errnos == nil {
			s.errnos = map[string]int{}
		}
		s.errnos["restore:"+errno]++
	}
}

// Event reports what was offered, accepted and switched. Call it after Run
// has returned.
func (s *Switcher) Event() *event.Preempt {
	e := &event.Preempt{
		Offered:  slices.Clone(s.initial.Offered),
		Initial:  s.initial.Current,
		Accepted: slices.Clone(s.accepted),
		Switches: s.switches,
		Skipped:  s.skipped,
	}
	if e.Offered == nil {
		e.Offered = []string{}
	}
	if e.Accepted == nil {
		e.Accepted = []string{}
	}
	if len(s.rejected) > 0 {
		e.Rejected = s.rejected
	}
	if len(s.errnos) > 0 {
		e.Errnos = s.errnos
	}
	return e
}

// Disable records why no switching happens (the option is off), so the
// event says so instead of looking like a kernel without the file.
func (s *Switcher) Disable(why string) { s.skipped = why }
