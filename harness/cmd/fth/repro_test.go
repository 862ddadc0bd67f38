package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/results"
)

func TestReproCell(t *testing.T) {
	r := results.Result{
		Cell: "riscv64-direct-calls-full", Seed: "3599456800",
		Request: &results.Request{
			Arch: "riscv64", Fragments: []string{"base", "arch/riscv64", "ftrace/direct-calls", "preempt/full"},
			Preempt: "full", Scenario: "churn", AgentArgs: map[string]string{"scenario": "churn", "churn": "2m"},
			Accel: "tcg-single", CPUs: 2, MemoryMB: 1024, Deadline: 1800, Silence: 90, Singlestep: true,
		},
	}
	c, err := reproCell(r)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != r.Cell || c.Arch.Name != "riscv64" || c.Preempt != "full" || c.CPUs != 2 || c.MemoryMB != 1024 {
		t.Errorf("cell = %+v", c)
	}
	if o := c.Agent.Options(); o.Seed != 3599456800 || o.Churn != 2*time.Minute || o.Scenario != "churn" {
		t.Errorf("agent args = %v, want the reported seed added to the recorded ones", c.Agent)
	}
	if r.Request.AgentArgs["seed"] != "" {
		t.Error("reproCell changed the recorded request")
	}
	if c.Deadline != 30*time.Minute || c.Silence != 90*time.Second || !c.Widen.Singlestep {
		t.Errorf("deadline %v silence %v widen %+v", c.Deadline, c.Silence, c.Widen)
	}

	// A seed given explicitly wins over the reported one (they are equal anyway).
	r.Request.AgentArgs["seed"] = "7"
	if c, _ := reproCell(r); c.Agent.Options().Seed != 7 {
		t.Errorf("seed = %d, want the requested 7", c.Agent.Options().Seed)
	}
	// A result from before fth run wrote the scenario into the
	// arguments has only the label: the cell runs what it says.
	old := *r.Request
	old.AgentArgs = map[string]string{"churn": "2m"}
	if c, err := reproCell(results.Result{Cell: r.Cell, Request: &old}); err != nil || c.Agent.Options().Scenario != "churn" {
		t.Errorf("scenario from the label: %v, %v", c.Agent.Options().Scenario, err)
	}
	// A recorded argument the agent refuses is an error naming it.
	bad := *r.Request
	bad.AgentArgs = map[string]string{"scenario": "churn", "churn": "forever"}
	if _, err := reproCell(results.Result{Cell: r.Cell, Request: &bad}); err == nil || !strings.Contains(err.Error(), "request.agent_args") {
		t.Errorf("bad recorded argument: %v", err)
	}

	if _, err := reproCell(results.Result{}); err == nil || !strings.Contains(err.Error(), "no request") {
		t.Errorf("old result: err = %v", err)
	}
	// The toolchain and QEMU replay; results from before them ran on the host's.
	if c.Toolchain != kbuild.CompilerHost || c.QEMU != qemu.EmulatorHost {
		t.Errorf("old result: toolchain %q, qemu %q, want host", c.Toolchain, c.QEMU)
	}
	r.Request.Toolchain, r.Request.QEMU = "gcc-14", "11.1"
	if c, err := reproCell(r); err != nil || c.Toolchain != kbuild.GCC14 || c.QEMU != qemu.QEMU111 {
		t.Errorf("toolchain %q, qemu %q, %v; want gcc-14 and 11.1", c.Toolchain, c.QEMU, err)
	}
	r.Request.Toolchain = "gcc-13"
	if _, err := reproCell(r); err == nil || !strings.Contains(err.Error(), "request.toolchain") {
		t.Errorf("bad toolchain: %v", err)
	}
	r.Request.Toolchain = ""
	r.Request.Arch = "sparc"
	if _, err := reproCell(r); err == nil {
		t.Error("unknown arch accepted")
	}
}
