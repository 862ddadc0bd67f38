package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"strings"

	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
)

// reproducerFail starts the line with which a reproducer's run.sh says
// what went wrong, before it exits 1.
const reproducerFail = "FAIL: "

// executeStandalone runs a known finding's standalone reproducer and
// nothing else of the harness's: run.sh under u-root's shell, as a
// maintainer would run it with sh. Its exit status is the verdict: 0
// pass, 1 the bug (its last "FAIL: " line is the title), anything else
// the reproducer could not run. Every line it prints is logged.
func (a *agent) executeStandalone(ctx context.Context) error {
	dir := path.Join(known.GuestReproDir, a.opts.Reproducer)
	script := path.Join(dir, "run.sh")
	cmd := exec.CommandContext(ctx, command("gosh"), scriptArgs(script, a.opts.ReproducerArgs)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/bbin:/bin:/usr/bin:/sbin:/usr/sbin", "HOME=/", "MODDIR=" + known.GuestModuleDir}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("reproducer %s: %w", a.opts.Reproducer, err)
	}
	cmd.Stderr = cmd.Stdout
	emit.Logf(a.w, "reproducer %s: sh %s", a.opts.Reproducer, strings.Join(append([]string{script}, a.opts.ReproducerArgs...), " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("reproducer %s: %w", a.opts.Reproducer, err)
	}
	// Read to the end before Wait, which closes the pipe.
	fail := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		emit.Logf(a.w, "%s: %s", a.opts.Reproducer, line)
		if msg, ok := strings.CutPrefix(line, reproducerFail); ok {
			fail = msg
		}
	}
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case werr == nil:
		_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &event.Oracle{Name: event.OracleReproducer, OK: true, Msg: a.opts.Reproducer}})
		return nil
	case errors.As(werr, &exit) && exit.ExitCode() == 1:
		if fail == "" {
			fail = a.opts.Reproducer + " exited 1 without a " + strings.TrimSpace(reproducerFail) + " line"
		}
		_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &event.Oracle{Name: event.OracleReproducer, Title: fail, Msg: a.opts.Reproducer}})
		return nil
	default:
		return emit.Unjudged(fmt.Errorf("reproducer %s could not run: %w", a.opts.Reproducer, werr))
	}
}

// scriptArgs are the shell's arguments that run script with args. u-root's
// gosh gives a script file no arguments, so it sources the script from a
// command that sets them, as sh script <args> would.
func scriptArgs(script string, args []string) []string {
	words := []string{"set", "--"}
	for _, w := range args {
		words = append(words, shellQuote(w))
	}
	return []string{"-c", strings.Join(words, " ") + "; . " + shellQuote(script)}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
