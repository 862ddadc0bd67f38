package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// cellVariant is one way `fth bench cell` runs the default cell: the
// defaults, or the defaults with some agent options replaced.
type cellVariant struct {
	name  string
	agent map[string]string
}

// cmdBenchCell times the default cell (what `make test-arch=<arch>` runs)
// against a baseline variant of it, in one run on one machine, and prints
// each phase's wall time with its ratio to the baseline. The baseline
// defaults to the cell as it was before detaches were sampled (detach=all),
// so the ratio is the speed-up that change bought.
func cmdBenchCell(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench cell")
	var b buildFlags
	b.register(fs, withAll)
	var (
		out      = fs.String("out", "out/runs", "directory for run results")
		baseline = fs.String("baseline", "detach=all", "agent options (key=value,...) that turn the default cell into the baseline; empty runs the default cell alone")
		seed     = fs.Int64("seed", 0, "seed shared by both cells (0: one drawn now), so both attach the same functions")
	)
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth bench cell [flags]",
		About: "Runs the default cell of --arch (what make test-arch=<arch> runs) twice in\none run, as the baseline (the default with --baseline's agent options) and as\nthe default, with one seed, and prints each phase's wall time, the latency\npercentiles and default/baseline ratios.",
	}); err != nil {
		return err
	}
	a, repo, frags, err := b.resolve()
	if err != nil {
		return err
	}
	base, err := parseAgentList(*baseline)
	if err != nil {
		return err
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano()&0x7fffffff | 1
	}
	def := matrix.DefaultParams()
	variants := benchCellVariants(def, base, *seed)
	log := newLogger(stderr, b.verbose)
	env := b.env(log, repo)
	runID := "bench-cell-" + newRunID()
	runDir := filepath.Join(*out, runID)
	var rows []results.Result
	for _, v := range variants {
		args, err := options.NewArgs(v.agent)
		if err != nil {
			return err
		}
		c := runner.Cell{
			Name: v.name, Arch: a, Fragments: frags, Preempt: "full", Agent: args,
			Accel: def.Accel, CPUs: def.CPUs, MemoryMB: def.MemoryMB, Deadline: def.Deadline, Silence: def.Silence,
			Toolchain: b.toolchain,
		}
		log.Info("bench cell", "variant", v.name, "agent", args.String())
		r, err := env.Run(ctx, runID, runDir, c)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(stdout, "\ndefault cell on %s, seed %d", a.Name, *seed)
	if len(rows) > 1 {
		fmt.Fprintf(stdout, "; baseline = default with %s (ratios: default / baseline, same run)", *baseline)
	}
	fmt.Fprint(stdout, "\n\n")
	printCellBench(stdout, variants, rows)
	fmt.Fprintf(stdout, "\nresults: %s\n", runDir)
	return nil
}

// benchCellVariants are the cells bench cell runs: the baseline (the
// default with base's agent options), when base has any, then the default,
// both with seed. Each names its scenario in its agent options: the agent
// runs what they say, not the cell's label, and without it the "default
// cell" ran the storm alone.
func benchCellVariants(def matrix.Params, base map[string]string, seed int64) []cellVariant {
	agent := func(extra map[string]string) map[string]string {
		a := maps.Clone(def.Agent)
		a["scenario"] = string(def.Scenario)
		maps.Copy(a, extra)
		a["seed"] = fmt.Sprint(seed)
		return a
	}
	variants := []cellVariant{{"default", agent(nil)}}
	if len(base) > 0 {
		variants = append([]cellVariant{{"baseline", agent(base)}}, variants...)
	}
	return variants
}

// printCellBench writes one column per variant and, with two, their ratio.
func printCellBench(w io.Writer, variants []cellVariant, rows []results.Result) {
	secs := func(d event.Duration) float64 { return time.Duration(d).Seconds() }
	ms := func(d event.Duration) float64 { return float64(time.Duration(d)) / float64(time.Millisecond) }
	phase := func(r results.Result, name string) *event.Phase { return r.Phases[name] }
	type metric struct {
		name string
		unit string
		get  func(results.Result) float64
	}
	metrics := []metric{
		{"kernel (build or cache)", "s", func(r results.Result) float64 { return r.Timings.KernelSeconds }},
		{"initramfs", "s", func(r results.Result) float64 { return r.Timings.ImageSeconds }},
		{"boot → agent", "s", func(r results.Result) float64 { return r.Timings.BootToAgentSeconds }},
		{"guest", "s", func(r results.Result) float64 { return r.Timings.GuestSeconds }},
		{"  load phase", "s", func(r results.Result) float64 { return wall(phase(r, "load"), secs) }},
		{"  attach phase", "s", func(r results.Result) float64 { return wall(phase(r, "attach"), secs) }},
		{"  detach phase", "s", func(r results.Result) float64 { return wall(phase(r, "detach"), secs) }},
		{"cell total", "s", func(r results.Result) float64 { return r.Timings.TotalSeconds }},
		{"attached", "", func(r results.Result) float64 { return count(phase(r, "attach")) }},
		{"detached with timing", "", func(r results.Result) float64 { return count(phase(r, "detach")) }},
		{"attach p50", "ms", func(r results.Result) float64 { return lat(phase(r, "attach"), ms, 50) }},
		{"attach p99", "ms", func(r results.Result) float64 { return lat(phase(r, "attach"), ms, 99) }},
		{"detach p50", "ms", func(r results.Result) float64 { return lat(phase(r, "detach"), ms, 50) }},
		{"detach p99", "ms", func(r results.Result) float64 { return lat(phase(r, "detach"), ms, 99) }},
		{"churn stage", "s", func(r results.Result) float64 { return stageSeconds(r, event.StageChurn) }},
		{"churn transitions", "/s", func(r results.Result) float64 {
			return perSecond(churnTransitions(r), stageSeconds(r, event.StageChurn))
		}},
		{"delivery calls checked", "/s", func(r results.Result) float64 {
			if r.Delivery == nil {
				return 0
			}
			return perSecond(float64(r.Delivery.Checked), stageSeconds(r, event.StageChurn))
		}},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"", "unit"}
	for _, v := range variants {
		head = append(head, v.name)
	}
	if len(rows) == 2 {
		head = append(head, "ratio")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, m := range metrics {
		cols := []string{m.name, m.unit}
		for _, r := range rows {
			cols = append(cols, fmt.Sprintf("%.1f", m.get(r)))
		}
		if len(rows) == 2 {
			cols = append(cols, fmt.Sprintf("%.2f×", ratio(m.get(rows[1]), m.get(rows[0]))))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	verdicts := []string{"verdict", ""}
	for _, r := range rows {
		verdicts = append(verdicts, string(r.Verdict))
	}
	fmt.Fprintln(tw, strings.Join(verdicts, "\t")+"\t")
	tw.Flush()
}

// stageSeconds is how long a campaign stage ran (0 outside a campaign).
func stageSeconds(r results.Result, name string) float64 {
	for _, st := range r.Stages {
		if st.Name == name {
			return st.Seconds
		}
	}
	return 0
}

// churnTransitions counts the churn's successful transitions: the delivery
// oracle's own steps are not among them, so the count shows what the
// oracle costs the churn.
func churnTransitions(r results.Result) float64 {
	n := 0
	for _, t := range r.Transitions {
		n += t.Succeeded
	}
	return float64(n)
}

func perSecond(n, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return n / secs
}

func wall(p *event.Phase, secs func(event.Duration) float64) float64 {
	if p == nil {
		return 0
	}
	return secs(p.Wall)
}

func count(p *event.Phase) float64 {
	if p == nil {
		return 0
	}
	return float64(p.Succeeded)
}

func lat(p *event.Phase, ms func(event.Duration) float64, pct int) float64 {
	if p == nil {
		return 0
	}
	if pct == 50 {
		return ms(p.Latency.Median)
	}
	return ms(p.Latency.P99)
}

// parseAgentList reads "k=v,k=v" (empty: none).
func parseAgentList(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: --baseline %q: want key=value,... (agent options)", errUsage, s)
		}
		m[k] = v
	}
	return m, nil
}
