// Package fthtarget is the guest's view of fth_target.ko, the project's
// own test module (stress/kmod-target): its name, its functions and its debugfs
// files, one home for the agent, the race injections and the helpers.
package fthtarget

import (
	"fmt"
	"path/filepath"

	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/modload"
)

// The module and its functions.
const (
	Module = "fth_target"
	// Hot is called by the module's kthreads all the time.
	Hot = "fth_target_hot"
	// Counted is called only through Call.
	Counted = "fth_target_counted"
	// Caller is the function that calls Counted, the Call file's write
	// handler: it is on a task's stack wherever inside Counted or its
	// trampoline the task was preempted.
	Caller = "call_write"
	// Napping sleeps as long as a write to NapFile asks; NapCaller, the
	// NapFile's write handler, calls it.
	Napping   = "fth_target_napping"
	NapCaller = "nap_write"
)

// The module's debugfs files.
const (
	// Call: a write calls Counted once.
	Call = "/sys/kernel/debug/fth_target/call"
	// NapFile: a write of M calls Napping, which sleeps M ms.
	NapFile = "/sys/kernel/debug/fth_target/nap"
	// Barrier: a write returns once every call_rcu_tasks() callback
	// queued before it has run (rcu_barrier_tasks()).
	Barrier = "/sys/kernel/debug/fth_target/rcu_tasks_barrier"
)

// Load loads fth_target.ko from modDir with params unless it is already
// loaded; the crash injections and the race need it outside the module
// cycling.
func Load(modDir, params string) error {
	if modload.Loaded(Module) {
		return nil
	}
	return modload.Load(filepath.Join(modDir, Module+".ko"), params)
}

// CountedAddr is Counted's address, from kallsyms.
func CountedAddr() (uint64, error) {
	addrs, err := ksyms.ReadModule(ksyms.DefaultPath, Module, []string{Counted})
	if err != nil {
		return 0, err
	}
	fn, ok := addrs.Addr(Counted)
	if !ok {
		return 0, fmt.Errorf("no kallsyms address for %s", Counted)
	}
	return fn, nil
}
