package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// widenMode is one emulator setting `fth bench widening` compares.
type widenMode struct {
	name  string
	accel qemu.Accel
	widen qemu.Widening
}

// widenModes are compared against the first, the default.
var widenModes = []widenMode{
	{"tcg-single", qemu.AccelTCGSingle, qemu.Widening{}},
	{"tcg-multi", qemu.AccelTCGMulti, qemu.Widening{}},
	{"tcg-single+singlestep", qemu.AccelTCGSingle, qemu.Widening{Singlestep: true}},
	{"tcg-single+icount", qemu.AccelTCGSingle, qemu.Widening{Icount: "shift=auto,sleep=off"}},
}

// cmdBench runs benchmarks that compare settings side by side in one run.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	benches := map[string]cmdFunc{"cell": cmdBenchCell, "widening": cmdBenchWidening}
	if len(args) > 0 {
		if f, ok := benches[args[0]]; ok {
			return f(ctx, args[1:], stdout, stderr)
		}
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, benchUsage)
		return nil
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: fth bench: name a benchmark: cell or widening (run 'fth bench -h')", errUsage)
	}
	return fmt.Errorf("%w: fth bench: unknown benchmark %q: cell or widening (run 'fth bench -h')", errUsage, args[0])
}

const benchUsage = `usage: fth bench <benchmark> [flags]

Benchmarks compare settings side by side in one run and print ratios:
  cell      the default cell (make test-arch=<arch>) against a baseline variant
            of it (default: detach=all, the cell before detaches were sampled)
  widening  the cost of each race-widening mode (tcg-multi, singlestep, icount)
            on the churn, against tcg-single

Run 'fth bench <benchmark> -h' for its flags.
`

// cmdBenchWidening runs the churn under each race-widening mode.
func cmdBenchWidening(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench widening")
	var b buildFlags
	b.register(fs, withAll)
	var (
		churn    = fs.Duration("churn", 60*time.Second, "churn duration of each run")
		seed     = fs.Int64("seed", 42, "seed shared by every run")
		out      = fs.String("out", "out/runs", "directory for run results")
		modes    = fs.String("modes", "", "comma-separated subset of modes (default all: tcg-single, tcg-multi, tcg-single+singlestep, tcg-single+icount)")
		deadline = fs.Duration("mode-deadline", 8*time.Minute, "bound on each mode's cell: singlestep may not finish a churn cycle in minutes; the rate then comes from the operations logged so far")
	)
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth bench widening [flags]",
		About: "Runs the same churn (same seed) under tcg-single, tcg-multi, tcg-single with\none instruction per block, and tcg-single with -icount, and prints boot time and\nchurn operations per second of each as a ratio to tcg-single.",
	}); err != nil {
		return err
	}
	a, repo, frags, err := b.resolve()
	if err != nil {
		return err
	}
	log := newLogger(stderr, b.verbose)
	env := b.env(log, repo)
	runID := "bench-widening-" + newRunID()
	runDir := filepath.Join(*out, runID)
	type row struct {
		mode      widenMode
		r         results.Result
		opsPerSec float64
	}
	var rows []row
	want := map[string]bool{}
	for _, m := range splitList(*modes) {
		want[m] = true
	}
	def := matrix.DefaultParams()
	for _, m := range widenModes {
		if len(want) > 0 && !want[m.name] {
			continue
		}
		agent := map[string]string{
			"scenario": "churn", "churn": churn.String(), "seed": fmt.Sprint(*seed), "n": "0", "hot": "8",
			"modlist": "ftrace_direct,ftrace_direct_too,ftrace_direct_multi,fth_target",
		}
		args, err := options.NewArgs(agent)
		if err != nil {
			return err
		}
		c := runner.Cell{
			Name: m.name, Arch: a, Fragments: frags, Preempt: "full", Agent: args,
			Accel: m.accel, CPUs: def.CPUs, MemoryMB: def.MemoryMB, Deadline: *deadline, Silence: 3 * time.Minute, Widen: m.widen,
			Toolchain: b.toolchain,
		}
		log.Info("bench widening", "mode", m.name)
		r, err := env.Run(ctx, runID, runDir, c)
		if err != nil {
			return err
		}
		rows = append(rows, row{m, r, opRate(filepath.Join(runDir, m.name, results.EventsFile))})
	}
	if len(rows) == 0 {
		return fmt.Errorf("%w: --modes %q selects none of the modes", errUsage, *modes)
	}
	fmt.Fprintf(stdout, "\nrace widening on %s, churn %s, seed %d (ratios against %s, same run)\n\n", a.Name, churn, *seed, rows[0].mode.name)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tVERDICT\tBOOT→AGENT s\tRATIO\tCHURN OPS/s\tRATIO\tTITLE")
	base := rows[0]
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.2f×\t%.1f\t%.2f×\t%s\n", r.mode.name, r.r.Verdict,
			r.r.Timings.BootToAgentSeconds, ratio(r.r.Timings.BootToAgentSeconds, base.r.Timings.BootToAgentSeconds),
			r.opsPerSec, ratio(r.opsPerSec, base.opsPerSec), r.r.Title())
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nresults: %s\n", runDir)
	return nil
}

func ratio(x, base float64) float64 {
	if base == 0 {
		return 0
	}
	return x / base
}

// opRate is churn operations per second from the operation log: the number
// of op events over the time between the first and the last. It works for
// a cell cut short by its deadline too.
func opRate(eventsPath string) float64 {
	f, err := os.Open(eventsPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	var first, last float64
	for sc.Scan() {
		var ev event.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Kind != event.KindOp || ev.Op.CPU == nil {
			continue
		}
		if n == 0 {
			first = ev.Op.AtMS
		}
		last = ev.Op.AtMS
		n++
	}
	if n < 2 || last <= first {
		return 0
	}
	return float64(n-1) / ((last - first) / 1000)
}
