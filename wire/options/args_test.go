package options

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

// TestArgsCmdlineIsGivenSorted: only the options given travel, in name
// order, so that two runs of one cell have one command line.
func TestArgsCmdlineIsGivenSorted(t *testing.T) {
	a, err := NewArgs(map[string]string{"n": "2000", "crash": "sysrq-c", "hold": "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Cmdline(), " "); got != "fth.crash=sysrq-c fth.hold=5s fth.n=2000" {
		t.Errorf("Cmdline = %q", got)
	}
	if o := a.Options(); o.N != 2000 || o.Hold != 5*time.Second {
		t.Errorf("Options: N %d, Hold %v", o.N, o.Hold)
	}
}

func TestArgs(t *testing.T) {
	var zero Args
	if zero.Options().Scenario != Defaults(HostEnv).Scenario || len(zero.Cmdline()) != 0 || zero.String() != "(defaults)" {
		t.Errorf("zero Args: %v %v %q", zero.Options().Scenario, zero.Cmdline(), zero.String())
	}
	a, err := NewArgs(map[string]string{"scenario": "churn"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.With("churn", "90s")
	if err != nil {
		t.Fatal(err)
	}
	if a.Has("churn") || !b.Has("churn") || b.Options().Churn != 90*time.Second || b.Options().Scenario != event.ScenarioChurn {
		t.Errorf("With changed its receiver or lost an option: a %v, b %v", a, b)
	}
	g := b.Given()
	g["n"] = "1"
	if b.Has("n") {
		t.Error("Given shares the map")
	}
	// includeknown is read by host and guest alike: 1 is true for both.
	k, err := NewArgs(map[string]string{"includeknown": "1"})
	if err != nil || !k.Options().IncludeKnown {
		t.Errorf("includeknown=1: %v, %v", k.Options().IncludeKnown, err)
	}
	var ae *ArgError
	if _, err := NewArgs(map[string]string{"scenaro": "churn"}); !errors.As(err, &ae) || ae.Key != "scenaro" {
		t.Errorf("a typo: %v, want an ArgError naming scenaro", err)
	}
	if _, err := a.With("n", "many"); !errors.As(err, &ae) || ae.Key != "n" {
		t.Errorf("With a bad value: %v, want an ArgError naming n", err)
	}
}

// TestNoStringReadsOfAgentArgs holds the host to reading agent options
// as fields: a key looked up in the text (AgentArgs["includeknown"] ==
// "true") is how host and guest came to disagree on a value before.
func TestNoStringReadsOfAgentArgs(t *testing.T) {
	re := regexp.MustCompile(`AgentArgs\[`)
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "out" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if re.MatchString(line) {
				t.Errorf("%s:%d reads an agent option by its text: %s (read Args.Options()' field)", p, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFormat: the words a log shows are the command line's, without the
// prefix, in the same order.
func TestFormat(t *testing.T) {
	given := map[string]string{"seed": "7", "churn": "2m", "n": "0"}
	if got := Format(given); got != "churn=2m n=0 seed=7" {
		t.Errorf("Format = %q", got)
	}
	a, err := NewArgs(given)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.String(); got != Format(given) {
		t.Errorf("String = %q, want Format's %q", got, Format(given))
	}
}
