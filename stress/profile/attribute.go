package profile

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

//go:embed costs.txt
var costsText string

// Keys of the costs that are not in costs.txt.
const (
	// KeyUser is time the thread spent in user space: the agent itself.
	KeyUser = "user"
	// KeyIRQ is interrupts, softirqs and their callbacks that ran on the
	// thread's time.
	KeyIRQ = "irq"
	// KeyOther is kernel time no rule names.
	KeyOther = "other"
	// KeyPreempted is time the thread was runnable but another task had
	// its CPU: contention, not the cost of the code it was in.
	KeyPreempted = "preempted"
)

// Rules sorts stacks into cost centres.
type Rules struct {
	costs                    []rule // in file order
	what                     map[string]string
	sched, preempt, irqentry rule
}

// rule is one line of costs.txt.
type rule struct {
	key      string
	exact    map[string]bool
	prefixes []string
}

func (r rule) match(fn string) bool {
	if r.exact[fn] {
		return true
	}
	for _, p := range r.prefixes {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// DefaultRules are the rules of costs.txt.
func DefaultRules() (*Rules, error) { return ParseRules(costsText) }

// ParseRules reads rules in the format of costs.txt.
func ParseRules(text string) (*Rules, error) {
	rs := &Rules{what: map[string]string{
		KeyUser:      "the agent in user space",
		KeyIRQ:       "interrupts and softirqs on the thread's time",
		KeyOther:     "other kernel work",
		KeyPreempted: "preempted: runnable, another task on the CPU",
	}}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "|")
		if len(parts) != 3 {
			return nil, fmt.Errorf("costs line %d: want <key> | <what> | <patterns>, got %q", i+1, line)
		}
		r := rule{key: strings.TrimSpace(parts[0]), exact: map[string]bool{}}
		what := strings.TrimSpace(parts[1])
		for _, p := range strings.Fields(parts[2]) {
			if s, ok := strings.CutSuffix(p, "*"); ok {
				r.prefixes = append(r.prefixes, s)
			} else {
				r.exact[p] = true
			}
		}
		if len(r.exact)+len(r.prefixes) == 0 {
			return nil, fmt.Errorf("costs line %d: %q has no patterns", i+1, r.key)
		}
		switch r.key {
		case "@sched":
			rs.sched = r
		case "@preempt":
			rs.preempt = r
		case "@irqentry":
			rs.irqentry = r
		default:
			if strings.HasPrefix(r.key, "@") || what == "" {
				return nil, fmt.Errorf("costs line %d: %q: a cost needs a key without @ and what it is", i+1, r.key)
			}
			if _, dup := rs.what[r.key]; dup {
				return nil, fmt.Errorf("costs line %d: %q twice", i+1, r.key)
			}
			rs.costs = append(rs.costs, r)
			rs.what[r.key] = what
		}
	}
	for _, r := range []rule{rs.sched, rs.preempt, rs.irqentry} {
		if r.exact == nil {
			return nil, fmt.Errorf("costs: @sched, @preempt and @irqentry are all needed")
		}
	}
	return rs, nil
}

// What says what the cost key is.
func (rs *Rules) What(key string) string { return rs.what[key] }

// Centre is where one stack's time goes: a cost key and a name made of the
// outermost frame of the matching run and its caller, such as
// "synchronize_rcu_tasks ← ftrace_shutdown".
type Centre struct {
	Key, Name string
}

// How is how the thread spent a stack's time.
type How int

const (
	// OnCPU is a sample of the thread running.
	OnCPU How = iota
	// Blocked is time off the CPU, asleep: the stack it switched out in.
	Blocked
	// Preempted is time off the CPU while runnable: the kernel said so
	// (PERF_RECORD_MISC_SWITCH_OUT_PREEMPT).
	Preempted
)

// Classify names the cost of a stack of function names, innermost first.
// Off the CPU the scheduler's frames are stepped over; a preemption is
// charged to KeyPreempted, named after the code it interrupted.
func (rs *Rules) Classify(frames []string, how How) Centre {
	if how != OnCPU {
		i := 0
		for i < len(frames) && rs.sched.match(frames[i]) {
			i++
		}
		if how == Preempted {
			for i < len(frames) && rs.preempt.match(frames[i]) {
				i++
			}
			// Preempted on an interrupt's way out: its entry frames
			// come next, and the interrupted code after them.
			for i < len(frames) && rs.irqentry.match(frames[i]) {
				i++
			}
			if i >= len(frames) {
				return Centre{Key: KeyPreempted, Name: "user space"}
			}
			return Centre{Key: KeyPreempted, Name: edge(frames, i)}
		}
		frames = frames[i:]
	}
	if len(frames) == 0 {
		return Centre{Key: KeyUser, Name: "user space"}
	}
	if k := slices.IndexFunc(frames, rs.irqentry.match); k >= 0 {
		return Centre{Key: KeyIRQ, Name: frames[max(k-1, 0)]}
	}
	for i, fn := range frames {
		for _, r := range rs.costs {
			if r.match(fn) {
				j := i
				for j+1 < len(frames) && r.match(frames[j+1]) {
					j++
				}
				return Centre{Key: r.key, Name: edge(frames, j)}
			}
		}
	}
	return Centre{Key: KeyOther, Name: edge(frames, 0)}
}

// edge names frame i with its caller.
func edge(frames []string, i int) string {
	if i+1 < len(frames) {
		return frames[i] + " ← " + frames[i+1]
	}
	return frames[i]
}

// topCentres is how many centres a profile lists.
const topCentres = 10

// Attribute sorts a recording into cost keys and centres, against wall, the
// time the caller measured around the profiled work. The samples say how
// the thread's CPU time divides between stacks; the cpu-clock count says
// how much there is, so each sampled stack gets its share of that count.
// Off-CPU time is measured per stack, not estimated.
func (rs *Rules) Attribute(rec *Recording, syms *Symbols, wall time.Duration) event.Profile {
	sampled, off := rec.SampledTotal(), rec.OffCPUTotal()
	on := rec.CPUTime
	if on <= 0 {
		on = sampled
	}
	p := event.Profile{
		WallSeconds:    wall.Seconds(),
		OnCPUSeconds:   on.Seconds(),
		SampledSeconds: sampled.Seconds(),
		OffCPUSeconds:  off.Seconds(),
		PeriodMicros:   int(rec.Period / time.Microsecond),
		Samples:        rec.Samples,
		Switches:       rec.Switches,
		Throttled:      rec.Throttled,
		Lost:           rec.Lost,
		Margin:         Margin,
	}
	if wall > 0 {
		p.Coverage = round3((on + off).Seconds() / wall.Seconds())
		p.AddsUp = p.Coverage >= 1-Margin && p.Coverage <= 1+Margin
	}
	if wall < MinWall {
		p.AddsUp = false
		p.Error = fmt.Sprintf("%v is too short to check the sum (under %v)", wall.Round(time.Microsecond), MinWall)
	}
	scale := 1.0
	if sampled > 0 {
		scale = on.Seconds() / sampled.Seconds()
	}
	keys := map[string]*event.ProfileCost{}
	centres := map[Centre]*event.ProfileCost{}
	charge := func(m map[string]time.Duration, how How) {
		for k, d := range m {
			c := rs.Classify(syms.Names(rec.Stacks[k]), how)
			kc := keys[c.Key]
			if kc == nil {
				kc = &event.ProfileCost{Key: c.Key, Name: rs.What(c.Key)}
				keys[c.Key] = kc
			}
			cc := centres[c]
			if cc == nil {
				cc = &event.ProfileCost{Key: c.Key, Name: c.Name}
				centres[c] = cc
			}
			secs := d.Seconds()
			if how == OnCPU {
				secs *= scale
			}
			for _, x := range []*event.ProfileCost{kc, cc} {
				x.Seconds += secs
				if how != OnCPU {
					x.OffCPUSeconds += secs
				}
			}
		}
	}
	charge(rec.OnCPU, OnCPU)
	charge(rec.OffCPU, Blocked)
	charge(rec.Preempted, Preempted)
	p.Costs = sorted(keys, wall, 0)
	p.Centres = sorted(centres, wall, topCentres)
	return p
}

// sorted lists the costs largest first, at most n (0: all), with their
// share of wall and rounded seconds.
func sorted[K comparable](m map[K]*event.ProfileCost, wall time.Duration, n int) []event.ProfileCost {
	out := make([]event.ProfileCost, 0, len(m))
	for _, c := range m {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b event.ProfileCost) int {
		if a.Seconds != b.Seconds {
			if a.Seconds > b.Seconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	for i := range out {
		if wall > 0 {
			out[i].Share = round3(out[i].Seconds / wall.Seconds())
		}
		out[i].Seconds = round3(out[i].Seconds)
		out[i].OffCPUSeconds = round3(out[i].OffCPUSeconds)
	}
	return out
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
