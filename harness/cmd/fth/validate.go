package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/wire/options"
)

// agentFlags names the fth flags that set an agent option, so that an
// error about the option names what the user typed.
func agentFlags() map[string]string {
	return map[string]string{"n": "--n", "hold": "--hold", "detach": "--detach", "seed": "--seed", "crash": "--crash"}
}

// checkAgentArgs parses the agent options on the host with the agent's own
// option table (wire/options), the one source of truth, so that a typo
// or an impossible value fails in a second instead of in the guest after
// a kernel build and a boot.
//
// It returns them as a cell carries them: the text as given, for the
// guest, and the options as the agent will read them, which the host
// reads from there, never from the text.
func checkAgentArgs(agent map[string]string, fromFlag map[string]string) (options.Args, error) {
	o, err := options.NewArgs(agent)
	var arg *options.ArgError
	switch {
	case errors.As(err, &arg):
		k := arg.Key
		where := "--agent-arg " + k + "=" + arg.Value
		if f, ok := fromFlag[k]; ok {
			where = f + " " + arg.Value
		}
		if errors.Is(err, options.ErrUnknownOption) {
			hint := ""
			if s, ok := closest(k, options.Names()); ok {
				hint = fmt.Sprintf("; did you mean %s?", s)
			}
			return o, fmt.Errorf("%w: %s: the agent has no option %q%s ('fth run --agent-arg help' lists them)", errUsage, where, k, hint)
		}
		return o, fmt.Errorf("%w: %s: %v", errUsage, where, unwrapOption(arg.Err))
	case err != nil:
		return o, fmt.Errorf("%w: agent options: %v", errUsage, err)
	}
	return o, nil
}

// unwrapOption drops the "option k=v:" prefix Set adds, since the caller
// names the input already.
func unwrapOption(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// printAgentOptions lists the agent's options for --agent-arg.
func printAgentOptions(w io.Writer) {
	fmt.Fprintln(w, "agent options (--agent-arg key=value; the fth.<key>=<value> kernel parameters):")
	options.PrintHelp(w, options.Env{NumCPU: 2, Poweroff: true})
}

// preemptModels are the values the kernel's preempt= parameter takes
// (PREEMPT_DYNAMIC); which of them a given kernel accepts is its business.
func preemptModels() []string { return []string{"none", "voluntary", "full", "lazy"} }

// Bounds of a VM cell. QEMU takes more, but past these a TCG guest on a
// workstation is a typo, not a plan.
const (
	maxCPUs  = 64
	minMemMB = 256
	maxMemMB = 65536
)

// checkBoot checks the boot parameters of a VM cell.
func checkBoot(cpus, memMB int, deadline, silence time.Duration, preempt string) error {
	switch {
	case cpus < 1 || cpus > maxCPUs:
		return fmt.Errorf("%w: --cpus %d: want 1 to %d vCPUs", errUsage, cpus, maxCPUs)
	case memMB < minMemMB || memMB > maxMemMB:
		return fmt.Errorf("%w: --mem %d: want %d to %d MiB", errUsage, memMB, minMemMB, maxMemMB)
	}
	if err := checkPositive("deadline", deadline, false); err != nil {
		return err
	}
	if err := checkPositive("silence", silence, false); err != nil {
		return err
	}
	if silence >= deadline {
		return fmt.Errorf("%w: --silence %s must be shorter than --deadline %s, or the watchdog can never fire", errUsage, silence, deadline)
	}
	if models := preemptModels(); preempt != "" && !slices.Contains(models, preempt) {
		hint := ""
		if s, ok := closest(preempt, models); ok {
			hint = fmt.Sprintf("; did you mean %s?", s)
		}
		return fmt.Errorf("%w: --preempt %q: want %s, or \"\" for the build's default%s", errUsage, preempt, strings.Join(models, ", "), hint)
	}
	return nil
}

// checkPositive refuses a zero or negative duration flag (zero allowed
// when zeroOK: "off").
func checkPositive(name string, d time.Duration, zeroOK bool) error {
	if d < 0 || (d == 0 && !zeroOK) {
		want := "> 0"
		if zeroOK {
			want = ">= 0 (0: off)"
		}
		return fmt.Errorf("%w: --%s %s: want a duration %s, e.g. 90s", errUsage, name, d, want)
	}
	return nil
}
