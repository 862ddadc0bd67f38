// Package hang explains a guest that stopped making progress, from what its
// kernel printed: the tasks an RCU-tasks stall warning names as holding the
// grace period, the blocked tasks of sysrq w, and the runqueues of sysrq t.
// It answers what a kernel developer asks first: which task, blocked where,
// and whether the harness's own real-time load owned every CPU (a stall the
// harness caused, not the kernel).
package hang

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/printk"
	"github.com/ftrace-harness/fth/results/regs"
)

// Task is one task as sched_show_task prints it.
type Task struct {
	Comm  string `json:"comm"`
	PID   int    `json:"pid"`
	State string `json:"state"`
	// Frames are the reliable stack frames, innermost first, without
	// offsets.
	Frames []string `json:"frames,omitempty"`
	// Where is the first frame that is not a scheduler, sleep, lock or
	// wait primitive: where the task is stuck, in its own terms; "user
	// space" for a task interrupted there with no such frame.
	Where string `json:"where,omitempty"`
}

// CPU is one CPU's runqueue as sysrq t prints it (sched debug).
type CPU struct {
	// Snapshot counts the sysrq t dumps this CPU's lines came from, from 1.
	Snapshot int `json:"snapshot"`
	ID       int `json:"cpu"`
	Running  int `json:"nr_running"`
	// Runnable are the tasks in state R on it, the one it runs first.
	Runnable []Runnable `json:"runnable,omitempty"`
}

// Runnable is a row of sched debug's runnable tasks table in state R.
type Runnable struct {
	Comm    string `json:"comm"`
	PID     int    `json:"pid"`
	Current bool   `json:"current,omitempty"`
	// Prio is the kernel priority: 0-98 real-time (lower is higher),
	// 100-139 normal.
	Prio int `json:"prio"`
}

// Explanation is what the console says about a hang.
type Explanation struct {
	// Title follows the console's "<kind> in <function>" form.
	Title string       `json:"title"`
	Kind  console.Kind `json:"kind"`
	// Holders are the tasks an RCU-tasks stall warning named.
	Holders []Task `json:"holders,omitempty"`
	// Blocked are sysrq w's tasks.
	Blocked []Task `json:"blocked,omitempty"`
	CPUs    []CPU  `json:"cpus,omitempty"`
	// Evidence says in a few lines what the title rests on.
	Evidence []string `json:"evidence,omitempty"`
}

// Harness describes the harness's own load, to tell its stalls apart.
type Harness struct {
	// Comm is the task name of the harness's threads in the guest.
	Comm string
	// RTPrios bounds the kernel priorities of its real-time threads
	// (kernel prio = 99 - rt_priority): [Lo, Hi].
	RTPrioLo, RTPrioHi int
}

var (
	taskRe  = regexp.MustCompile(`^task:(.+?)\s+state:(\S+)(?:\s+running task)?\s+stack:\s*\d+\s+pid:\s*(\d+)`)
	frameRe = regexp.MustCompile(`^\s*(\?\s+)?([A-Za-z_.$][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+`)
	cpuRe   = regexp.MustCompile(`^cpu#(\d+)`)
	nrRunRe = regexp.MustCompile(`^\s*\.nr_running\s*:\s*(\d+)`)
)

// isWait says fn is how a stuck task waits, never where it is stuck: the
// console's rule for a hung task's title (console.WaitFrame), so that a
// blocked task here and a hung-task report there name the same frame.
func isWait(fn string) bool { return console.WaitFrame(fn) }

// Explain reads the console lines of a hang (the stall warnings before it
// and the sysrq output after it) and says what they show. h describes the
// harness's own threads.
func Explain(lines []string, h Harness) Explanation {
	var e Explanation
	var cur *Task
	section := ""
	cpu, snap := -1, 0
	for _, raw := range lines {
		line := printk.Text(strings.TrimRight(raw, "\r"))
		switch {
		case strings.Contains(line, "rcu_tasks detected stalls on tasks"):
			section, cur = "holders", nil
			continue
		case strings.HasPrefix(line, "sysrq: Show Blocked State"):
			section, cur = "blocked", nil
			continue
		case strings.HasPrefix(line, "sysrq: Show State"):
			section, cur = "state", nil
			snap++
			continue
		case strings.HasPrefix(line, "sysrq: "):
			section, cur = "other", nil
			continue
		}
		if m := taskRe.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[3])
			t := Task{Comm: m[1], State: m[2], PID: pid}
			switch section {
			case "holders":
				e.Holders = append(e.Holders, t)
				cur = &e.Holders[len(e.Holders)-1]
			case "blocked":
				e.Blocked = append(e.Blocked, t)
				cur = &e.Blocked[len(e.Blocked)-1]
			default:
				cur = nil
			}
			continue
		}
		if cur != nil {
			// The registers of an interrupt taken in user mode: x86's
			// user code segment, the others' user addresses.
			if regs.UserMode().MatchString(line) && cur.Where == "" {
				cur.Where = "user space"
				continue
			}
			if m := frameRe.FindStringSubmatch(line); m != nil {
				if m[1] == "" {
					cur.Frames = append(cur.Frames, m[2])
					if cur.Where == "" && !isWait(m[2]) {
						cur.Where = m[2]
					}
				}
				continue
			}
		}
		if m := cpuRe.FindStringSubmatch(line); m != nil {
			cpu, _ = strconv.Atoi(m[1])
			e.CPUs = append(e.CPUs, CPU{Snapshot: snap, ID: cpu})
			continue
		}
		if cpu >= 0 && len(e.CPUs) > 0 {
			c := &e.CPUs[len(e.CPUs)-1]
			if m := nrRunRe.FindStringSubmatch(line); m != nil && c.Running == 0 {
				c.Running, _ = strconv.Atoi(m[1])
			}
			if r, ok := runnableRow(line); ok {
				if r.Current {
					c.Runnable = append([]Runnable{r}, c.Runnable...)
				} else {
					c.Runnable = append(c.Runnable, r)
				}
			}
		}
	}
	e.decide(h)
	return e
}

// runnableRow reads a row in state R of sched debug's runnable tasks
// table (print_task: ">R" for the current task or " R", then comm pid
// weight vruntime E|N deadline [S] slice sum-exec switches prio ...).
func runnableRow(line string) (Runnable, bool) {
	var r Runnable
	rest, cur := strings.CutPrefix(line, ">R")
	if !cur {
		var ok bool
		if rest, ok = strings.CutPrefix(line, " R "); !ok {
			return r, false
		}
	}
	f := strings.Fields(rest)
	if len(f) < 10 || (f[4] != "E" && f[4] != "N") {
		return r, false
	}
	i := 6 // after comm pid weight vruntime E|N deadline: slice, or the custom-slice S
	if f[i] == "S" {
		i++
	}
	i += 3 // slice sum-exec switches -> prio
	if i >= len(f) {
		return r, false
	}
	pid, err1 := strconv.Atoi(f[1])
	prio, err2 := strconv.Atoi(f[i])
	if err1 != nil || err2 != nil {
		return r, false
	}
	return Runnable{Comm: f[0], PID: pid, Current: cur, Prio: prio}, true
}

// decide picks the title, in order of what explains the most.
func (e *Explanation) decide(h Harness) {
	for _, c := range e.CPUs {
		var rows []string
		for _, r := range c.Runnable {
			mark := ""
			if r.Current {
				mark = "*"
			}
			rows = append(rows, fmt.Sprintf("%s%s/%d prio %d", mark, r.Comm, r.PID, r.Prio))
		}
		e.Evidence = append(e.Evidence, fmt.Sprintf("dump %d cpu#%d: %d runnable: %s", c.Snapshot, c.ID, c.Running, strings.Join(rows, ", ")))
	}
	for _, t := range e.Holders {
		e.Evidence = append(e.Evidence, fmt.Sprintf("rcu_tasks holder: %s pid %d state %s in %s", t.Comm, t.PID, t.State, orNone(t.Where)))
	}
	for _, t := range e.Blocked {
		e.Evidence = append(e.Evidence, fmt.Sprintf("blocked: %s pid %d in %s", t.Comm, t.PID, orNone(t.Where)))
	}
	switch {
	case len(e.Holders) > 0:
		// A holder is the task the grace period waits for, the harness's
		// own threads included (preempted inside a trampoline, say).
		t := e.Holders[0]
		if i := slices.IndexFunc(e.Holders, func(t Task) bool { return t.Where != "" }); i >= 0 {
			t = e.Holders[i]
		}
		if why, ok := e.starvedByHarness(t.PID, h); ok {
			e.Kind = console.KindHarnessInduced
			e.Title = fmt.Sprintf("harness-induced stall: rcu_tasks held by %s in %s, starved by the harness's own real-time threads", t.Comm, orUnknown(t.Where))
			e.Evidence = append(e.Evidence, why)
			return
		}
		e.Kind = console.KindRCUStall
		e.Title = fmt.Sprintf("INFO: rcu_tasks grace period stall: held by %s in %s", t.Comm, orUnknown(t.Where))
	case len(e.Blocked) > 0:
		t := pick(e.Blocked, h.Comm)
		e.Kind = console.KindHang
		e.Title = fmt.Sprintf("hang: %s blocked in %s", t.Comm, orUnknown(t.Where))
	}
}

// starvedByHarness reports whether, in every runqueue dump, task pid waits
// runnable on a CPU whose current task is one of the harness's real-time
// threads or where one of them, of the task's priority or higher, waits
// ahead of it: the kernel waits for a task that the harness's own load
// keeps off the CPU. why quotes the dumps.
func (e *Explanation) starvedByHarness(pid int, h Harness) (why string, ok bool) {
	snaps := map[int]bool{}
	starved := map[int]bool{}
	var quote []string
	for _, c := range e.CPUs {
		snaps[c.Snapshot] = true
		i := slices.IndexFunc(c.Runnable, func(r Runnable) bool { return r.PID == pid })
		if i < 0 || c.Runnable[i].Current {
			continue
		}
		held := c.Runnable[i]
		for _, r := range c.Runnable {
			rt := r.Comm == h.Comm && r.Prio >= h.RTPrioLo && r.Prio <= h.RTPrioHi
			if r.PID != pid && rt && (r.Current || r.Prio <= held.Prio) {
				starved[c.Snapshot] = true
				quote = append(quote, fmt.Sprintf("dump %d cpu#%d: %s/%d (prio %d) waits behind the harness's real-time %s/%d (prio %d)", c.Snapshot, c.ID, held.Comm, held.PID, held.Prio, r.Comm, r.PID, r.Prio))
				break
			}
		}
	}
	if len(snaps) == 0 || len(starved) != len(snaps) {
		return "", false
	}
	return strings.Join(quote, "; "), true
}

// pick prefers a task with a place over one without, and the harness's
// own threads over the rest: a silent agent is silent because one of its
// threads is blocked, and its stack says on what (a kernel thread asleep
// in its own loop, as fth_target's are, explains nothing).
func pick(ts []Task, harness string) Task {
	best := slices.IndexFunc(ts, func(t Task) bool { return t.Where != "" && t.Comm == harness })
	if best < 0 {
		best = slices.IndexFunc(ts, func(t Task) bool { return t.Where != "" })
	}
	if best < 0 {
		best = 0
	}
	return ts[best]
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown function"
	}
	return s
}
