package kbuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ErrBadFragment is wrapped by every fragment syntax error.
var ErrBadFragment = errors.New("bad kconfig fragment")

// Setting is one symbol assignment requested by a fragment.
type Setting struct {
	// Symbol is the name without the CONFIG_ prefix.
	Symbol string
	// Value is as written in .config: "y", "m", "n", a number or a quoted string.
	// "# CONFIG_X is not set" is Value "n".
	Value string
	// Origin is file:line, for error messages.
	Origin string
}

// Fragment is one kconfigs/ file.
type Fragment struct {
	// Name is the path relative to the kconfigs directory, e.g. "preempt/full".
	Name     string
	Settings []Setting
	// Text is the raw content, part of the build's cache key.
	Text []byte
}

var (
	setRe   = regexp.MustCompile(`^CONFIG_([A-Za-z0-9_]+)=(.*)$`)
	unsetRe = regexp.MustCompile(`^# CONFIG_([A-Za-z0-9_]+) is not set$`)
	valueRe = regexp.MustCompile(`^([ymn]|-?[0-9]+|0x[0-9a-fA-F]+|"([^"\\]|\\.)*")$`)
)

// ParseFragment parses a fragment's text. name is used in errors.
func ParseFragment(name string, text []byte) (Fragment, error) {
	f := Fragment{Name: name, Text: text}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		origin := fmt.Sprintf("%s:%d", name, n)
		if m := unsetRe.FindStringSubmatch(line); m != nil {
			f.Settings = append(f.Settings, Setting{Symbol: m[1], Value: "n", Origin: origin})
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := setRe.FindStringSubmatch(line)
		if m == nil {
			return Fragment{}, fmt.Errorf("%w: %s: %q is not a CONFIG_<SYMBOL>=<value> line, a \"# CONFIG_<SYMBOL> is not set\" line or a comment", ErrBadFragment, origin, line)
		}
		if !valueRe.MatchString(m[2]) {
			return Fragment{}, fmt.Errorf("%w: %s: CONFIG_%s has value %q; use y, m, n, a number or a \"quoted string\"", ErrBadFragment, origin, m[1], m[2])
		}
		f.Settings = append(f.Settings, Setting{Symbol: m[1], Value: m[2], Origin: origin})
	}
	return f, sc.Err()
}

// LoadFragments reads the named fragments from dir (the kconfigs directory).
func LoadFragments(dir string, names []string) ([]Fragment, error) {
	frags := make([]Fragment, 0, len(names))
	for _, name := range names {
		text, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: fragment %q not found under %s: %s", ErrBadFragment, name, dir, available(dir))
		}
		if err != nil {
			return nil, fmt.Errorf("read fragment %s: %w", name, err)
		}
		f, err := ParseFragment(name, text)
		if err != nil {
			return nil, err
		}
		frags = append(frags, f)
	}
	return frags, nil
}

func available(dir string) string {
	var names []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(dir, path)
			names = append(names, rel)
		}
		return nil
	})
	sort.Strings(names)
	if len(names) == 0 {
		return "the directory has no fragments"
	}
	return "available: " + strings.Join(names, ", ")
}

// Merge returns the effective request of frags: later fragments override
// earlier ones, as merge_config.sh does.
func Merge(frags []Fragment) []Setting {
	idx := map[string]int{}
	var out []Setting
	for _, f := range frags {
		for _, s := range f.Settings {
			if i, ok := idx[s.Symbol]; ok {
				out[i] = s
				continue
			}
			idx[s.Symbol] = len(out)
			out = append(out, s)
		}
	}
	return out
}
