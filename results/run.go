package results

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

// ErrNoCells means a directory holds no <cell>/result.json.
var ErrNoCells = errors.New("no cells: a run directory holds <cell>/result.json for each cell (pass out/runs/<run-id>, not out/runs)")

// Run is a run directory as read from disk.
type Run struct {
	// Dir is the run directory as given.
	Dir string
	// ID is the run id: summary.json's, else the cells', else Dir's name.
	ID string
	// At is when the run was summarised (summary.json), else when its first
	// cell started.
	At time.Time
	// Cells are the cell directories, in the order the run made them.
	Cells []Cell
}

// Cell is one cell directory.
type Cell struct {
	// Dir is the cell directory relative to the run directory, which is
	// also how the report links its files.
	Dir string
	// Result is the cell's result.json.
	Result Result
	// Variant is the cell name without its "<arch>-" prefix.
	Variant string
	// Files lists which of the known cell files exist.
	Files []string
	// Progress holds the agent's progress events, in order.
	Progress []event.Progress
	// ProgressAt holds each progress event's time.
	ProgressAt []time.Time
	// BadEvents counts lines of events.jsonl that did not parse: a harness
	// killed mid-write leaves half a line.
	BadEvents int
	// BenchFromEvents is set when result.json had no bench section and
	// Result.Bench was taken from the bench event in events.jsonl: the
	// event is the agent's own record, and a host that did not fold it in
	// must not hide the measurements.
	BenchFromEvents bool

	// bench is the last bench event seen in events.jsonl.
	bench *event.Bench
}

// LoadRun reads every cell of the run directory dir. Cells come in
// summary.json's order, then any it does not list by name.
func LoadRun(ctx context.Context, dir string) (*Run, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read run directory: %w (pass out/runs/<run-id>)", err)
	}
	run := &Run{Dir: dir}
	var sum Summary
	if b, err := os.ReadFile(filepath.Join(dir, SummaryFile)); err == nil {
		if err := json.Unmarshal(b, &sum); err != nil {
			return nil, fmt.Errorf("%s: %w (delete it and run fth report again to rebuild it from the cells)", filepath.Join(dir, SummaryFile), err)
		}
		run.ID, run.At = sum.RunID, sum.At
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), ResultFile)); err == nil {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: %w", dir, ErrNoCells)
	}
	order := map[string]int{}
	for i, c := range sum.Cells {
		order[filepath.Base(c.Dir)] = i + 1
		if _, ok := order[c.Cell]; !ok {
			order[c.Cell] = i + 1
		}
	}
	sort.SliceStable(names, func(i, j int) bool {
		oi, oj := order[names[i]], order[names[j]]
		if (oi == 0) != (oj == 0) {
			return oi != 0
		}
		if oi != oj {
			return oi < oj
		}
		return names[i] < names[j]
	})
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("load %s: %w", dir, err)
		}
		c, err := loadCell(dir, name)
		if err != nil {
			return nil, err
		}
		run.Cells = append(run.Cells, c)
	}
	if run.ID == "" {
		run.ID = run.Cells[0].Result.RunID
	}
	if run.ID == "" {
		run.ID = filepath.Base(filepath.Clean(dir))
	}
	if run.At.IsZero() {
		for _, c := range run.Cells {
			if t := c.Result.StartedAt; !t.IsZero() && (run.At.IsZero() || t.Before(run.At)) {
				run.At = t
			}
		}
	}
	return run, nil
}

func loadCell(runDir, name string) (Cell, error) {
	dir := filepath.Join(runDir, name)
	r, err := ReadResult(filepath.Join(dir, ResultFile))
	if err != nil {
		return Cell{}, fmt.Errorf("cell %s: %w", name, err)
	}
	if r.Cell == "" {
		r.Cell = name
	}
	c := Cell{Dir: name, Result: r, Variant: variantOf(r.Cell, r.Arch)}
	for _, f := range cellFiles() {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			c.Files = append(c.Files, f)
		}
	}
	if err := c.readEvents(filepath.Join(dir, EventsFile)); err != nil {
		return Cell{}, fmt.Errorf("cell %s: %w", name, err)
	}
	if c.Result.Bench == nil && c.bench != nil {
		c.Result.Bench, c.BenchFromEvents = c.bench, true
	}
	return c, nil
}

// variantOf strips the arch from a cell name ("x86_64-lockdep" → "lockdep").
func variantOf(cell, arch string) string {
	if v, ok := strings.CutPrefix(cell, arch+"-"); ok && arch != "" && v != "" {
		return v
	}
	return cell
}

func (c *Cell) readEvents(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev event.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			c.BadEvents++
			continue
		}
		switch {
		case ev.Kind == event.KindProgress && ev.Progress != nil:
			c.Progress = append(c.Progress, *ev.Progress)
			c.ProgressAt = append(c.ProgressAt, ev.Time)
		case ev.Kind == event.KindBench && ev.Bench != nil:
			c.bench = ev.Bench
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// Results returns the cells' results in order.
func (r *Run) Results() []Result {
	out := make([]Result, len(r.Cells))
	for i, c := range r.Cells {
		out[i] = c.Result
	}
	return out
}

// Summary rebuilds the run's summary from its cells.
func (r *Run) Summary() Summary {
	s := Summary{Schema: SchemaVersion, RunID: r.ID, At: r.At}
	for _, c := range r.Cells {
		s.Cells = append(s.Cells, Summarize(c.Result, filepath.Join(r.Dir, c.Dir)))
	}
	return s
}

// Arches and Variants return the heatmap's axes, in order of first appearance
// (the matrix runs arch-major, so this is the order it ran them in).
func (r *Run) Arches() []string {
	var out []string
	for _, c := range r.Cells {
		if !slices.Contains(out, c.Result.Arch) {
			out = append(out, c.Result.Arch)
		}
	}
	return out
}

// Variants: see Arches.
func (r *Run) Variants() []string {
	var out []string
	for _, c := range r.Cells {
		if !slices.Contains(out, c.Variant) {
			out = append(out, c.Variant)
		}
	}
	return out
}
