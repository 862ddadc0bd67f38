package hang

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/printk"
)

// harness is how the agent looked in the guests of the fixtures: u-root
// runs it as uinit, its RT threads then drew priorities 1-10.
var harness = Harness{Comm: "uinit", RTPrioLo: 89, RTPrioHi: 98}

func lines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// Real consoles of the stall the churn's preemption pressure caused on a
// correct x86_64 7.3.4 (fth run ... rt=2 timerperiod=500us, before the
// hammer's RT threads shared one priority): the RCU-tasks grace period
// waits on an agent thread that a higher-priority agent RT thread keeps
// off its CPU, and every ftrace update waits behind it. Both must come out
// harness-induced, naming the holder, with the runqueue rows as evidence.
func TestExplainHarnessInducedStall(t *testing.T) {
	cases := []struct {
		file, title, quote string
	}{
		{"x86_64-rt-priority-inversion-A.log", "harness-induced stall: rcu_tasks held by uinit in user space, starved by the harness's own real-time threads", "uinit/49 (prio 97) waits behind the harness's real-time uinit/54 (prio 96)"},
		{"x86_64-rt-priority-inversion-B.log", "harness-induced stall: rcu_tasks held by uinit in trace_vbprintk, starved by the harness's own real-time threads", "uinit/55 (prio 94) waits behind the harness's real-time uinit/51 (prio 93)"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			e := Explain(lines(t, c.file), harness)
			if e.Kind != console.KindHarnessInduced || e.Title != c.title {
				t.Fatalf("Explain = %s %q, want harness-induced %q\nevidence:\n%s", e.Kind, e.Title, c.title, strings.Join(e.Evidence, "\n"))
			}
			if !strings.Contains(strings.Join(e.Evidence, "\n"), c.quote) {
				t.Errorf("evidence does not quote %q:\n%s", c.quote, strings.Join(e.Evidence, "\n"))
			}
			if len(e.Blocked) < 3 || len(e.Holders) != 1 || len(e.CPUs) != 4 {
				t.Errorf("parsed %d blocked, %d holders, %d runqueues; want the agent's blocked ftrace updates, one holder, 2 CPUs x 2 dumps", len(e.Blocked), len(e.Holders), len(e.CPUs))
			}
		})
	}
}

// The same console, with the holder not starved by the harness (its RT
// rows renamed, as another program's would be), is the kernel's: an
// RCU-tasks stall titled by its holder.
func TestExplainKernelStall(t *testing.T) {
	ls := lines(t, "x86_64-rt-priority-inversion-B.log")
	for i, l := range ls {
		if strings.Contains(l, " prio ") || strings.HasPrefix(strings.TrimSpace(printk.Text(l)), "R ") {
			ls[i] = strings.Replace(l, "uinit    51", "other    51", 1)
		}
	}
	e := Explain(ls, harness)
	if e.Kind != console.KindRCUStall || e.Title != "INFO: rcu_tasks grace period stall: held by uinit in trace_vbprintk" {
		t.Fatalf("Explain = %s %q\n%s", e.Kind, e.Title, strings.Join(e.Evidence, "\n"))
	}
}

func TestRunnableRow(t *testing.T) {
	cases := []struct {
		line string
		want Runnable
		ok   bool
	}{
		{">R           uinit    53    1048576     34592.986743   E       34593.003749           1.400000     13678.623549     38052     120         0.000000         0.000", Runnable{"uinit", 53, true, 120}, true},
		{" R           uinit    51    1048576      2617.563907   E           0.278326           1.400000     53395.164563     35887      93         0.000000", Runnable{"uinit", 51, false, 93}, true},
		{" R           uinit    51    1048576      2617.563907   N           0.278326 S         1.400000     53395.164563     35887      93         0.000000", Runnable{"uinit", 51, false, 93}, true},
		{" S            init    43    1048576     25022.916095   E       25023.733034           1.400000        21.162876       136     120", Runnable{}, false},
		{" S            task   PID     weight       vruntime   eligible    deadline", Runnable{}, false},
	}
	for _, c := range cases {
		got, ok := runnableRow(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("runnableRow(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

func TestWhereSkipsWaiting(t *testing.T) {
	e := Explain([]string{
		"[ 1.0] sysrq: Show Blocked State",
		"[ 1.0] task:uinit           state:D stack:0     pid:54    tgid:48    ppid:1      task_flags:0x400140 flags:0x00080000",
		"[ 1.0] Call Trace:",
		"[ 1.0]  <TASK>",
		"[ 1.0]  __schedule+0x358/0x860",
		"[ 1.0]  schedule+0x28/0xa0",
		"[ 1.0]  schedule_preempt_disabled+0x15/0x30",
		"[ 1.0]  __mutex_lock.constprop.0+0x2f1/0x6a0",
		"[ 1.0]  ? some_guess+0x1/0x2",
		"[ 1.0]  update_ftrace_direct_mod+0x5c/0x2a0",
		"[ 1.0]  modify_fentry+0x1b/0x30",
		"[ 1.0]  </TASK>",
	}, harness)
	if e.Title != "hang: uinit blocked in update_ftrace_direct_mod" || e.Kind != console.KindHang {
		t.Fatalf("Explain = %s %q", e.Kind, e.Title)
	}
}
