package report

import (
	"testing"

	"github.com/ftrace-harness/fth/results"
)

// The page shows what triage --json carries: the guilty frame, the
// trampoline the report came through, and the CPU, task and taint.
func TestReportDetails(t *testing.T) {
	f := results.Finding{Title: "WARNING in migrate_enable", Function: "migrate_enable", Report: "" +
		"[   77.7] WARNING: kernel/sched/core.c:2480 at migrate_enable+0x11e/0x130, CPU#1: fth-agent/233\n" +
		"[   77.8] CPU: 1 UID: 0 PID: 233 Comm: fth-agent Tainted: G        W 7.3.4 #1 PREEMPT(full)\n" +
		"[   77.9] Call Trace:\n[   77.9]  <TASK>\n[   78.0]  __bpf_prog_exit_recur+0x40/0x60\n" +
		"[   78.1]  bpf_trampoline_6442491234+0x8e/0x1000\n[   78.2]  do_getpgid+0x5/0x60\n[   78.3]  </TASK>\n" +
		"[   78.4] ---[ end trace 0000000000000000 ]---"}
	guilty, via, where := reportDetails(f)
	if guilty != "migrate_enable" || via != "__bpf_prog_exit_recur" || where != "CPU 1, task fth-agent[233], taint GW" {
		t.Errorf("reportDetails = %q, %q, %q", guilty, via, where)
	}
	if g, v, w := reportDetails(results.Finding{Title: "hang: no output for 90s"}); g != "" || v != "" || w != "" {
		t.Errorf("a finding without a report = %q, %q, %q", g, v, w)
	}
}
