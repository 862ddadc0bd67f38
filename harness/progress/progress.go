// Package progress shows how far long steps are — a kernel build, an attach
// storm, a detach phase, a churn — on a terminal as one redrawn bar, and in a
// CI log as a plain line every few seconds, so that neither floods the log
// with carriage returns nor goes silent for minutes.
package progress

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// DefaultInterval is how often a plain line is logged for one step.
const DefaultInterval = 5 * time.Second

// IsTerminal reports whether f is a terminal (stderr of an interactive run,
// not a pipe or a CI log file).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// Reporter shows progress of any number of named steps. Its methods are safe
// for concurrent use (matrix cells run side by side). A nil Reporter
// reports nothing.
type Reporter struct {
	tty      bool
	w        io.Writer
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu     sync.Mutex
	bar    *progressbar.ProgressBar
	barKey string
	last   map[string]time.Time
	// start is when each step's first update came, for its ETA.
	start map[string]time.Time
}

// New returns a Reporter that draws a bar on w when tty is set, and logs
// plain lines to log otherwise.
func New(w io.Writer, tty bool, log *slog.Logger) *Reporter {
	return &Reporter{tty: tty, w: w, log: log, interval: DefaultInterval, now: time.Now, last: map[string]time.Time{}, start: map[string]time.Time{}}
}

// Update reports that step key ("x86_64 build", "cell attach") has done
// of total units (total <= 0: unknown), with a short detail (the file being
// compiled, the function being attached).
func (r *Reporter) Update(key string, done, total int, detail string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if _, ok := r.start[key]; !ok {
		r.start[key] = now
	}
	if r.tty {
		r.draw(key, done, total, detail)
		return
	}
	if t, ok := r.last[key]; ok && now.Sub(t) < r.interval && !(total > 0 && done >= total) {
		return
	}
	r.last[key] = now
	args := []any{"step", key, "done", done}
	if total > 0 {
		args = append(args, "total", total, "percent", fmt.Sprintf("%.0f%%", 100*float64(done)/float64(total)))
		if eta, ok := ETA(done, total, now.Sub(r.start[key])); ok && done < total {
			args = append(args, "eta", eta.Round(time.Second))
		}
	}
	if detail != "" {
		args = append(args, "at", detail)
	}
	r.log.Info("progress", args...)
}

// ETA is the time left for a step that did done of total units in
// elapsed, at the rate so far. It is unknown (false) before any unit is done;
// a step past its estimated total reports a second left, not a negative
// time, since estimated totals come from an earlier, similar run.
func ETA(done, total int, elapsed time.Duration) (time.Duration, bool) {
	if done <= 0 || total <= 0 || elapsed <= 0 {
		return 0, false
	}
	if done >= total {
		return time.Second, true
	}
	return time.Duration(float64(elapsed) * float64(total-done) / float64(done)), true
}

// draw redraws the bar for key, replacing the bar of another step: one
// line on the terminal, whatever step moved last.
func (r *Reporter) draw(key string, done, total int, detail string) {
	max := total
	if max <= 0 {
		max = -1 // a spinner with a count
	}
	if r.bar == nil || r.barKey != key || r.bar.GetMax() != max {
		if r.bar != nil {
			_ = r.bar.Finish()
			fmt.Fprintln(r.w)
		}
		r.bar = progressbar.NewOptions(max,
			progressbar.OptionSetWriter(r.w),
			progressbar.OptionSetDescription(key),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionFullWidth(),
		)
		r.barKey = key
	}
	if detail != "" {
		r.bar.Describe(fmt.Sprintf("%s: %s", key, trim(detail, 40)))
	}
	_ = r.bar.Set(done)
}

// Done ends step key: a finished bar stays on the terminal; a plain line
// says the step ended.
func (r *Reporter) Done(key string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.start, key)
	if r.tty {
		if r.bar != nil && r.barKey == key {
			_ = r.bar.Finish()
			fmt.Fprintln(r.w)
			r.bar, r.barKey = nil, ""
		}
		return
	}
	delete(r.last, key)
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}
