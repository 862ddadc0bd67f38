package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/symbolize"
)

// symbolizers opens each vmlinux once per report.
type symbolizers struct {
	opts   Options
	open   map[string]*symbolize.Symbolizer
	failed map[string]error
}

func (s *symbolizers) get(path string) (*symbolize.Symbolizer, error) {
	if sym, ok := s.open[path]; ok {
		return sym, nil
	}
	if err, ok := s.failed[path]; ok {
		return nil, err
	}
	sym, err := symbolize.Open(path, symbolize.Options{})
	if err != nil {
		s.failed[path] = err
		return nil, err
	}
	s.open[path] = sym
	return sym, nil
}

// forCell picks the symbolizer for a cell, or says why there is none ("" when
// symbolization was not asked for).
func (s *symbolizers) forCell(r results.Result) (*symbolize.Symbolizer, string) {
	path := s.opts.Vmlinux
	if path == "" {
		if !s.opts.AutoVmlinux {
			return nil, ""
		}
		path = r.Kernel.Vmlinux
		if path == "" {
			return nil, "stacks not symbolized: result.json names no vmlinux"
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Sprintf("stacks not symbolized: %s is not on this machine (pass --vmlinux)", path)
		}
	}
	sym, err := s.get(path)
	if err != nil {
		return nil, "stacks not symbolized: " + err.Error()
	}
	return sym, ""
}

func (s *symbolizers) close() {
	for _, sym := range s.open {
		sym.Close()
	}
}
