package mutation

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ftrace-harness/fth/results"
)

// A mutation.json written before the schema moved here reads the same:
// the field names are the file's, not this package's.
func TestReadExistingFile(t *testing.T) {
	dir := t.TempDir()
	old := `{"run_id":"m","seed":7,"budget_seconds":120,"rows":[
 {"mutant":"","arch":"x86_64","detected":false,"verdict":"pass","build_seconds":0,"cell":"x86_64-unmutated"},
 {"mutant":"bpf-tramp-free-now","class":"trampoline-freed-early","arch":"x86_64","detected":true,"seconds":31.5,"title":"Oops","verdict":"fail","build_seconds":12,"cell":"c1","seed":"7"}]}`
	if err := os.WriteFile(filepath.Join(dir, results.MutationFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Table{RunID: "m", Seed: 7, Budget: 120, Rows: []Row{
		{Arch: "x86_64", Verdict: results.Pass, Cell: "x86_64-unmutated"},
		{Mutant: "bpf-tramp-free-now", Class: "trampoline-freed-early", Arch: "x86_64", Detected: true, Seconds: 31.5, Title: "Oops", Verdict: results.Fail, BuildSeconds: 12, Cell: "c1", Seed: "7"},
	}}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("Read = %+v\nwant %+v", *got, want)
	}
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	if again, err := Read(dir); err != nil || !reflect.DeepEqual(*again, want) {
		t.Errorf("Write then Read = %+v, %v", again, err)
	}
	if none, err := Read(t.TempDir()); none != nil || err != nil {
		t.Errorf("no mutation.json: %v, %v; want no table and no error", none, err)
	}
}

func TestSummaryAndErr(t *testing.T) {
	control := Row{Arch: "x86_64", Verdict: results.Pass}
	hit := func(s float64) Row {
		return Row{Mutant: "m", Arch: "x86_64", Detected: true, Seconds: s, Verdict: results.Fail}
	}
	miss := Row{Mutant: "n", Arch: "x86_64", Verdict: results.Pass}
	cases := []struct {
		name              string
		rows              []Row
		mutants, detected int
		median            float64
		err, errAll       error
	}{
		{"control only", []Row{control}, 0, 0, 0, nil, nil},
		{"odd detections", []Row{control, hit(3), hit(1), hit(2)}, 3, 3, 2, nil, nil},
		{"even detections and a miss", []Row{control, hit(4), hit(2), miss}, 3, 2, 3, nil, ErrUndetected},
		{"failed control", []Row{{Arch: "x86_64", Verdict: results.Fail, Detected: true}, hit(1)}, 1, 1, 1, ErrControlFailed, ErrControlFailed},
		// A build that failed is neither a detection nor an escape.
		{"harness error", []Row{control, hit(1), {Mutant: "e", Arch: "x86_64", Verdict: results.Error, Reason: "kernel build"}}, 1, 1, 1, ErrNotJudged, ErrNotJudged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab := Table{Rows: c.rows}
			n, d, med := tab.Summary()
			if n != c.mutants || d != c.detected || med != c.median {
				t.Errorf("Summary = %d, %d, %v; want %d, %d, %v", n, d, med, c.mutants, c.detected, c.median)
			}
			if err := tab.Err(false); !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Errorf("Err(false) = %v, want %v", err, c.err)
			}
			if err := tab.Err(true); !errors.Is(err, c.errAll) || (c.errAll == nil) != (err == nil) {
				t.Errorf("Err(true) = %v, want %v", err, c.errAll)
			}
		})
	}
}
