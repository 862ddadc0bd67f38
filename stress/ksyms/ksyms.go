// Package ksyms reads kernel symbol addresses from /proc/kallsyms, for the
// oracles that compare what the kernel reports with where a function is.
package ksyms

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// DefaultPath is the kernel's symbol table.
const DefaultPath = "/proc/kallsyms"

// ErrHidden means kallsyms prints zero addresses: the reader lacks
// CAP_SYSLOG or kptr_restrict hides them. An address oracle cannot run then.
var ErrHidden = errors.New("ksyms: /proc/kallsyms shows zero addresses (needs CAP_SYSLOG and kptr_restrict < 2)")

// Table maps built-in symbol names to addresses. A name the kernel has more
// than once maps to 0, because no single address is the right one.
type Table map[string]uint64

// Parse reads kallsyms text ("addr type name [module]") and keeps the
// built-in symbols among want (all of them if want is nil). Module symbols
// are skipped: the agent traces vmlinux only.
func Parse(r io.Reader, want map[string]bool) (Table, error) {
	t := Table{}
	nonzero, seen := false, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue // malformed, or a module symbol
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		seen = true
		if addr != 0 {
			nonzero = true
		}
		name := f[2]
		if want != nil && !want[name] {
			continue
		}
		if _, dup := t[name]; dup {
			t[name] = 0
			continue
		}
		t[name] = addr
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ksyms.Parse: %w", err)
	}
	if seen && !nonzero {
		return nil, ErrHidden
	}
	return t, nil
}

// Read parses the kallsyms file at path, keeping the names in want.
func Read(path string, want []string) (Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ksyms.Read: %w", err)
	}
	defer f.Close()
	w := make(map[string]bool, len(want))
	for _, n := range want {
		w[n] = true
	}
	return Parse(f, w)
}

// Addr returns the unique address of name. ok is false when the name is
// missing or ambiguous.
func (t Table) Addr(name string) (addr uint64, ok bool) {
	a := t[name]
	return a, a != 0
}

// ReadModule parses the kallsyms file at path for the symbols of module
// among want. A module's addresses change on every load: read them after
// each one.
func ReadModule(path, module string, want []string) (Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ksyms.ReadModule: %w", err)
	}
	defer f.Close()
	return ParseModule(f, module, want)
}

// ParseModule reads kallsyms text and keeps the symbols of module among
// want (all of its symbols if want is nil).
func ParseModule(r io.Reader, module string, want []string) (Table, error) {
	keep := map[string]bool{}
	for _, w := range want {
		keep[w] = true
	}
	tag := "[" + module + "]"
	t := Table{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[3] != tag || (want != nil && !keep[f[2]]) {
			continue
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		if _, dup := t[f[2]]; dup {
			t[f[2]] = 0
			continue
		}
		t[f[2]] = addr
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ksyms.ParseModule: %w", err)
	}
	return t, nil
}
