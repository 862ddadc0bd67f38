package kbuild

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Symbol is what the source tree's Kconfig files say about one symbol.
type Symbol struct {
	Name string
	// Type is bool, tristate, int, hex or string; "" when only defined by a
	// choice or an untyped redefinition.
	Type string
	// Prompt is false for symbols a user cannot set directly: they only follow
	// from select or a default (e.g. HAVE_*, most DYNAMIC_FTRACE_WITH_*).
	Prompt bool
	// DependsOn holds every "depends on" expression across definitions.
	DependsOn []string
	// Where is the file:line of the first definition.
	Where string
}

// Index maps symbol names to their Kconfig definitions.
type Index map[string]*Symbol

// IndexTree scans every Kconfig file under src. It reads only the lines the
// verifier needs, not a full Kconfig grammar: enough to tell "no such symbol"
// from "dependency not met" from "wrong type".
func IndexTree(src string) (Index, error) {
	idx := Index{}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "Documentation", "tools":
				if path != src {
					return fs.SkipDir
				}
			}
			return nil
		}
		if !strings.HasPrefix(d.Name(), "Kconfig") {
			return nil
		}
		return indexFile(idx, src, path)
	})
	if err != nil {
		return nil, fmt.Errorf("index Kconfig files under %s: %w", src, err)
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("no Kconfig symbols under %s: is it a kernel source tree?", src)
	}
	return idx, nil
}

func indexFile(idx Index, src, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rel, _ := filepath.Rel(src, path)
	var cur *Symbol
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "config", "menuconfig":
			cur = idx[rest]
			if cur == nil {
				cur = &Symbol{Name: rest, Where: fmt.Sprintf("%s:%d", rel, n)}
				idx[rest] = cur
			}
			continue
		case "choice", "endchoice", "menu", "endmenu", "if", "endif", "source", "comment", "mainmenu":
			cur = nil
			continue
		}
		if cur == nil {
			continue
		}
		switch word {
		case "bool", "tristate", "int", "hex", "string":
			cur.Type = word
			if rest != "" {
				cur.Prompt = true
			}
		case "def_bool", "def_tristate":
			cur.Type = strings.TrimPrefix(word, "def_")
		case "prompt":
			cur.Prompt = true
		case "depends":
			if expr, ok := strings.CutPrefix(rest, "on "); ok {
				cur.DependsOn = append(cur.DependsOn, strings.TrimSpace(expr))
			}
		}
	}
	return sc.Err()
}
