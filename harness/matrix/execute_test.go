package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
)

// fakeRunner stands in for *runner.Env: it writes a result the way Env.Run
// does, with a verdict chosen per cell, and never boots anything.
type fakeRunner struct {
	verdicts map[string]results.Verdict
	// bare lists cells whose runner fails before writing any result.
	bare  map[string]bool
	delay time.Duration
	// block, when set, holds every cell until it is closed.
	block chan struct{}

	mu       sync.Mutex
	ran      []string
	inFlight atomic.Int32
	peak     atomic.Int32
}

func (f *fakeRunner) Run(ctx context.Context, runID, runDir string, c runner.Cell) (results.Result, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	f.mu.Lock()
	f.ran = append(f.ran, c.Name)
	f.mu.Unlock()
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
		}
	}
	time.Sleep(f.delay)
	if f.bare[c.Name] {
		return results.Result{}, errors.New("cannot create cell directory")
	}
	w, err := results.NewCellWriter(filepath.Join(runDir, c.Name), results.Result{RunID: runID, Cell: c.Name, Arch: string(c.Arch.Name)})
	if err != nil {
		return results.Result{}, err
	}
	v := f.verdicts[c.Name]
	if v == "" {
		v = results.Pass
	}
	_ = w.Update(func(r *results.Result) { r.Verdict, r.Reason = v, "fake "+string(v) })
	if v == results.Error {
		return w.Result(), errors.New("boot: fake infrastructure error")
	}
	return w.Result(), nil
}

func testCells(names ...string) []Cell {
	a, _ := arch.Lookup("x86_64")
	var cells []Cell
	for _, n := range names {
		c := Cell{Name: n, Arch: a, Run: runner.Cell{Name: n, Arch: a, Fragments: []string{"base"}}}
		if reason, ok := strings.CutPrefix(n, "skip-"); ok {
			c.Skip = "no " + reason + " here"
		}
		cells = append(cells, c)
	}
	return cells
}

func readSummary(t *testing.T, dir string) results.Summary {
	t.Helper()
	var s results.Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExecute(t *testing.T) {
	dir := t.TempDir()
	f := &fakeRunner{
		verdicts: map[string]results.Verdict{"b": results.Fail, "c": results.Error},
		bare:     map[string]bool{"d": true},
	}
	cells := testCells("a", "skip-rt", "b", "c", "d", "e")
	sum, err := Execute(context.Background(), f, cells, 1, dir, "run1")
	if err != nil {
		t.Fatal(err)
	}
	// A failing or erroring cell does not stop the ones after it, and the
	// skipped one never reaches the runner.
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(f.ran, want) {
		t.Errorf("ran %v, want %v", f.ran, want)
	}
	var got []string
	for _, c := range sum.Cells {
		got = append(got, c.Cell+"="+string(c.Verdict))
	}
	want := []string{"a=pass", "skip-rt=skip", "b=fail", "c=error", "d=error", "e=pass"}
	if !slices.Equal(got, want) {
		t.Errorf("summary rows %v, want %v (cell order)", got, want)
	}
	if disk := readSummary(t, dir); len(disk.Cells) != len(cells) || disk.RunID != "run1" {
		t.Errorf("summary.json = %+v", disk)
	}
	// Skips and runner failures get a result.json of their own.
	skip, err := results.ReadResult(filepath.Join(dir, "skip-rt", "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if skip.Verdict != results.Skip || skip.Reason != "no rt here" || skip.RunID != "run1" || skip.Arch != "x86_64" {
		t.Errorf("skip result = %+v", skip)
	}
	bare, err := results.ReadResult(filepath.Join(dir, "d", "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bare.Verdict != results.Error || !strings.Contains(bare.Reason, "cannot create cell directory") {
		t.Errorf("runner failure result = %+v", bare)
	}
	n := map[results.Verdict]int{}
	for _, c := range sum.Cells {
		n[c.Verdict]++
	}
	if n[results.Pass] != 2 || n[results.Fail] != 1 || n[results.Error] != 2 || n[results.Skip] != 1 {
		t.Errorf("counts = %v", n)
	}
}

func TestExecuteParallelism(t *testing.T) {
	for _, parallel := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprint(parallel), func(t *testing.T) {
			f := &fakeRunner{delay: 20 * time.Millisecond}
			sum, err := Execute(context.Background(), f, testCells("a", "b", "c", "d", "e", "f"), parallel, t.TempDir(), "r")
			if err != nil {
				t.Fatal(err)
			}
			limit := max(parallel, 1)
			if p := int(f.peak.Load()); p > limit || (limit > 1 && p < 2) {
				t.Errorf("peak %d cells in flight with parallel=%d", p, parallel)
			}
			if len(sum.Cells) != 6 {
				t.Errorf("%d rows", len(sum.Cells))
			}
		})
	}
}

// summary.json is current while cells run, not only at the end.
func TestExecuteWritesSummaryAfterEveryCell(t *testing.T) {
	dir := t.TempDir()
	f := &fakeRunner{block: make(chan struct{})}
	done := make(chan results.Summary)
	go func() {
		sum, _ := Execute(context.Background(), f, testCells("skip-x", "a"), 1, dir, "r")
		done <- sum
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, err := os.ReadFile(filepath.Join(dir, "summary.json")); err == nil && strings.Contains(string(s), "skip-x") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no summary.json while a cell was still running")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := readSummary(t, dir); len(s.Cells) != 1 {
		t.Errorf("mid-run summary has %d rows, want the skip only", len(s.Cells))
	}
	close(f.block)
	if sum := <-done; len(sum.Cells) != 2 {
		t.Errorf("final summary has %d rows", len(sum.Cells))
	}
}

func TestExecuteInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeRunner{block: make(chan struct{})}
	done := make(chan results.Summary)
	go func() {
		sum, _ := Execute(ctx, f, testCells("a", "b", "c"), 1, dir, "r")
		done <- sum
	}()
	for {
		f.mu.Lock()
		started := len(f.ran)
		f.mu.Unlock()
		if started == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	sum := <-done
	if len(f.ran) != 1 {
		t.Errorf("ran %v after the interrupt", f.ran)
	}
	if len(sum.Cells) != 3 {
		t.Fatalf("rows %+v", sum.Cells)
	}
	for _, c := range sum.Cells[1:] {
		r, err := results.ReadResult(filepath.Join(dir, c.Cell, "result.json"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Verdict != results.Error || !strings.Contains(r.Reason, "not started: context canceled") {
			t.Errorf("%s: %s %q", c.Cell, c.Verdict, r.Reason)
		}
	}
}

func TestExecuteReportsUnwritableRunDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := Execute(context.Background(), &fakeRunner{}, testCells("skip-x"), 1, file, "r")
	if err == nil || !strings.Contains(err.Error(), "summary.json") {
		t.Errorf("err = %v", err)
	}
	if len(sum.Cells) != 1 || sum.Cells[0].Verdict != results.Skip {
		t.Errorf("summary = %+v", sum)
	}
}

// The keys errors list must be the keys the decoder takes.
func TestKeyListsMatchTags(t *testing.T) {
	tags := func(v any) []string {
		var out []string
		ty := reflect.TypeOf(v)
		for i := range ty.NumField() {
			out = append(out, strings.Split(ty.Field(i).Tag.Get("yaml"), ",")[0])
		}
		return out
	}
	if got := tags(fileSpec{}); !slices.Equal(got, fileKeys) {
		t.Errorf("fileSpec tags %v, fileKeys %v", got, fileKeys)
	}
	if got := tags(Variant{}); !slices.Equal(got, variantKeys) {
		t.Errorf("Variant tags %v, variantKeys %v", got, variantKeys)
	}
}
