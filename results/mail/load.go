package mail

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/results/symbolize"
	"github.com/ftrace-harness/fth/wire/event"
)

// Dir is the folder of a cell that Save writes the report into.
const Dir = "mail"

// ReportFile is the report's text in Dir.
const ReportFile = "report.txt"

// Options say where Load finds what a cell does not hold.
type Options struct {
	// Repo is the ftrace-harness checkout: the reproducers and fixes.
	Repo string
	// Vmlinux decodes the stack; "" takes the cell's own (result.json's
	// kernel.vmlinux) when it is on this machine.
	Vmlinux string
	// Bisect is a bisection's run directory (bisect-summary.txt), "" for
	// none.
	Bisect string
}

// Load reads a cell's directory into a Cell, its stack decoded, and
// returns the files to attach, by name, with where each is read from.
func Load(ctx context.Context, dir string, o Options) (Cell, map[string]string, error) {
	r, err := results.ReadResult(filepath.Join(dir, results.ResultFile))
	if err != nil {
		return Cell{}, nil, err
	}
	if r.Verdict != results.Fail {
		return Cell{}, nil, fmt.Errorf("%s: the cell's verdict is %s (%s): there is nothing to report", dir, r.Verdict, r.Reason)
	}
	c := NewCell(r)
	c.ReproCommand = "fth repro " + dir
	files := map[string]string{}
	attach := func(name, path string) {
		if _, err := os.Stat(path); err == nil {
			files[name] = path
		}
	}
	attach("console.log", filepath.Join(dir, results.ConsoleLog))
	attach(results.RegistersFile, filepath.Join(dir, results.RegistersFile))
	if r.Kernel.Vmlinux != "" {
		attach("kernel.config", filepath.Join(filepath.Dir(r.Kernel.Vmlinux), ".config"))
	}
	if name := c.Agent.Reproducer; name != "" {
		c.Output = reproducerOutput(filepath.Join(dir, results.EventsFile), name)
	}
	if h := r.Headline(true); h.Finding != nil && h.Finding.Report != "" {
		console, _ := os.ReadFile(filepath.Join(dir, results.ConsoleLog))
		c.Stack, c.StackNote = decode(ctx, r, h.Finding.Report, string(console), o.Vmlinux)
	}
	if o.Bisect != "" {
		b, err := os.ReadFile(filepath.Join(o.Bisect, results.BisectSummary))
		if err != nil {
			return Cell{}, nil, fmt.Errorf("--bisect: %w", err)
		}
		c.Bisect = string(b)
	}
	if f, how := match(&r, c.Agent); f != nil && how != known.ByTitle && o.Repo != "" {
		if f.Standalone != "" {
			src := filepath.Join(o.Repo, known.ReproDir, f.Standalone)
			ents, err := os.ReadDir(src)
			if err != nil {
				return Cell{}, nil, err
			}
			for _, e := range ents {
				if !e.IsDir() {
					files[e.Name()] = filepath.Join(src, e.Name())
				}
			}
		}
		for _, fix := range f.Fixes {
			files[fix] = filepath.Join(o.Repo, known.FixesDir, fix)
		}
	}
	for name := range files {
		c.Attachments = append(c.Attachments, name)
	}
	slices.Sort(c.Attachments)
	return c, files, nil
}

// decode decodes a report's call trace with the cell's vmlinux (or
// path), or says why not: another build's vmlinux, told by the console's
// addresses, would give wrong lines.
func decode(ctx context.Context, r results.Result, report, console, path string) ([]string, string) {
	if path == "" {
		path = r.Kernel.Vmlinux
	}
	if path == "" {
		return nil, "the run recorded no vmlinux"
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, path + " is not on this machine"
	}
	sym, err := symbolize.Open(path, symbolize.Options{})
	if err != nil {
		return nil, err.Error()
	}
	defer sym.Close()
	if console != "" {
		if _, err := sym.Check(console); errors.Is(err, symbolize.ErrMismatch) {
			return nil, err.Error()
		}
	}
	frames, err := sym.Report(ctx, report)
	if err != nil {
		return nil, err.Error()
	}
	out := decodedLines(frames)
	if len(out) == 0 {
		return nil, "the report has no call trace to decode"
	}
	return out, ""
}

// WriteCell writes the report of the cell in dir into <dir>/Dir, with its
// attachments (Load, Compose, Save), and returns it and its file.
func WriteCell(ctx context.Context, dir string, o Options) (Report, string, error) {
	c, files, err := Load(ctx, dir, o)
	if err != nil {
		return Report{}, "", err
	}
	rep := Compose(c)
	out := filepath.Join(dir, Dir)
	if err := Save(out, rep, files); err != nil {
		return Report{}, "", err
	}
	return rep, filepath.Join(out, ReportFile), nil
}

// Save writes the report and its attachments into dir: ReportFile, and
// each file under its name.
func Save(dir string, rep Report, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	var b strings.Builder
	if err := Write(&b, rep); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ReportFile), []byte(b.String()))
}

// reproducerOutput is what a standalone reproducer printed: the agent
// logs each of its lines as "<name>: <line>".
func reproducerOutput(events, name string) []string {
	f, err := os.Open(events)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev event.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Kind != event.KindLog {
			continue
		}
		if line, ok := strings.CutPrefix(ev.Log, name+": "); ok {
			out = append(out, line)
		}
	}
	return out
}

// decodedLines are the frames' lines, a frame at the same function and
// offset as the one before it left out: the faulting address comes in a
// report's first line, its NIP or RIP line and often its trace, and is
// decoded once.
func decodedLines(frames []symbolize.Frame) []string {
	var out []string
	for i, f := range frames {
		if i > 0 && f.Func != "" && f.Func == frames[i-1].Func && f.Offset == frames[i-1].Offset {
			continue
		}
		out = append(out, f.Lines()...)
	}
	return out
}
