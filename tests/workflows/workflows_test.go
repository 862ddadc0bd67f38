// Package workflows checks the GitHub Actions workflows against the code
// they drive: CI must run the README's two commands on Debian 12, and the
// nightly matrix must cover every architecture harness/arch knows and only
// variants fth matrix accepts. (.github/workflows cannot hold the test
// itself: a Go package directory cannot start with a dot.)
package workflows

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/matrix"
)

// root is the repository root, relative to this package.
const root = "../.."

type workflow struct {
	// On is kept as a node: "on:" may be a string, a list or a mapping.
	On   yaml.Node      `yaml:"on"`
	Jobs map[string]job `yaml:"jobs"`
}

type job struct {
	// Container is "image" or {image: ...}.
	Container yaml.Node `yaml:"container"`
	Strategy  struct {
		Matrix map[string]yaml.Node `yaml:"matrix"`
	} `yaml:"strategy"`
	Env   map[string]string `yaml:"env"`
	Steps []step            `yaml:"steps"`
}

type step struct {
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	If   string            `yaml:"if"`
	With map[string]string `yaml:"with"`
}

func load(t *testing.T, name string) workflow {
	t.Helper()
	path := filepath.Join(root, ".github", "workflows", name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(w.Jobs) == 0 {
		t.Fatalf("%s has no jobs", path)
	}
	return w
}

func (j job) image() string {
	if j.Container.Kind == yaml.ScalarNode {
		return j.Container.Value
	}
	var c struct {
		Image string `yaml:"image"`
	}
	_ = j.Container.Decode(&c)
	return c.Image
}

// runs reports whether any step's shell runs cmd as a command of its own
// (so "make test" is not matched by "make test-unit").
func (j job) runs(cmd string) bool {
	re := regexp.MustCompile(`(?m)(^|[;&|]\s*|\s)` + regexp.QuoteMeta(cmd) + `($|[\s;&|])`)
	return slices.ContainsFunc(j.Steps, func(s step) bool { return re.MatchString(s.Run) })
}

func (j job) step(pred func(step) bool) (step, bool) {
	i := slices.IndexFunc(j.Steps, pred)
	if i < 0 {
		return step{}, false
	}
	return j.Steps[i], true
}

func matrixList(t *testing.T, j job, key string) []string {
	t.Helper()
	n, ok := j.Strategy.Matrix[key]
	if !ok {
		return nil
	}
	var out []string
	if err := n.Decode(&out); err != nil {
		t.Fatalf("matrix.%s: want a list of names: %v", key, err)
	}
	return out
}

func TestCIRunsTheReadmeCommandsOnDebian12(t *testing.T) {
	w := load(t, "ci.yml")
	tests := []struct {
		what string
		ok   func(job) bool
	}{
		{"runs in a debian:bookworm container", func(j job) bool { return j.image() == "debian:bookworm" }},
		{"runs make deps", func(j job) bool { return j.runs("make deps") }},
		{"runs make test", func(j job) bool { return j.runs("make test") }},
	}
	for _, tt := range tests {
		found := false
		for _, j := range w.Jobs {
			if j.image() == "debian:bookworm" && tt.ok(j) {
				found = true
			}
		}
		if !found {
			t.Errorf("ci.yml: no Debian 12 job that %s", tt.what)
		}
	}
}

func TestNightlyCoversEveryArchAndValidVariants(t *testing.T) {
	w := load(t, "nightly.yml")
	if !strings.Contains(nodeText(w.On), "schedule") || !strings.Contains(nodeText(w.On), "cron") {
		t.Error("nightly.yml has no schedule with a cron line")
	}
	var cells *job
	for name, j := range w.Jobs {
		if _, ok := j.Strategy.Matrix["arch"]; ok {
			if cells != nil {
				t.Fatalf("two jobs have an arch matrix, %s and another", name)
			}
			j := j
			cells = &j
		}
	}
	if cells == nil {
		t.Fatal("nightly.yml: no job with strategy.matrix.arch")
	}
	arches := matrixList(t, *cells, "arch")
	for _, a := range arch.Names() {
		if !slices.Contains(arches, string(a)) {
			t.Errorf("nightly matrix lacks arch %s (harness/arch has it)", a)
		}
	}
	if _, err := matrix.ParseArches(arches); err != nil {
		t.Errorf("nightly matrix arch list: %v", err)
	}
	// Variants must be ones fth matrix accepts with the file the job passes.
	spec, err := matrix.LoadFile(filepath.Join(root, "tests", "matrix", "nightly.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	variants := matrixList(t, *cells, "variant")
	if len(variants) == 0 {
		t.Error("nightly matrix has no variant list")
	}
	for _, v := range variants {
		if _, err := matrix.ParseVariants([]string{v}, spec.Custom); err != nil {
			t.Errorf("nightly matrix variant %q: %v", v, err)
		}
	}

	if img := cells.image(); img != "debian:bookworm" {
		t.Errorf("cell job runs in %q, want debian:bookworm (make deps is written for it)", img)
	}
	for _, cmd := range []string{"make deps", "make fth"} {
		if !cells.runs(cmd) {
			t.Errorf("cell job does not run %s", cmd)
		}
	}
	checks := []struct {
		what string
		ok   func(step) bool
	}{
		{"runs fth matrix with the job's arch and variant", func(s step) bool {
			return strings.Contains(s.Run, "fth matrix") && strings.Contains(s.Run, `--arches "${{ matrix.arch }}"`) && strings.Contains(s.Run, `--variants "${{ matrix.variant }}"`) && strings.Contains(s.Run, "--file tests/matrix/nightly.yaml")
		}},
		{"caches /var/cache/fth kernels and ccache", func(s step) bool {
			p := s.With["path"]
			return strings.HasPrefix(s.Uses, "actions/cache@") && strings.Contains(p, "/var/cache/fth/kernels") && strings.Contains(p, "/var/cache/fth/ccache")
		}},
		{"uploads out/runs even when the cell failed", func(s step) bool {
			return strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["path"] == "out/runs" && s.If == "always()"
		}},
		{"writes the summary table to $GITHUB_STEP_SUMMARY even when the cell failed", func(s step) bool {
			return strings.Contains(s.Run, "fth report") && strings.Contains(s.Run, `--markdown "$GITHUB_STEP_SUMMARY"`) && s.If == "always()"
		}},
	}
	for _, c := range checks {
		if _, ok := cells.step(c.ok); !ok {
			t.Errorf("cell job has no step that %s", c.what)
		}
	}
	// The matrix step must come before the report and the upload.
	idx := func(pred func(step) bool) int { return slices.IndexFunc(cells.Steps, pred) }
	if m, r := idx(checks[0].ok), idx(checks[3].ok); m < 0 || r < m {
		t.Errorf("fth matrix (step %d) must run before fth report (step %d)", m, r)
	}
}

func nodeText(n yaml.Node) string {
	b, err := yaml.Marshal(&n)
	if err != nil {
		return ""
	}
	return string(b)
}

// The nightly race job explores every point of every window on every
// arch: one job per arch, running tests/matrix/race.yaml, whose agent
// options ask for every target and every point.
func TestNightlyRaceExploresEveryArch(t *testing.T) {
	w := load(t, "nightly-race.yml")
	if !strings.Contains(nodeText(w.On), "cron") {
		t.Error("nightly-race.yml has no cron schedule")
	}
	j, ok := w.Jobs["race"]
	if !ok {
		t.Fatal("nightly-race.yml: no race job")
	}
	arches := matrixList(t, j, "arch")
	for _, a := range arch.Names() {
		if !slices.Contains(arches, string(a)) {
			t.Errorf("race matrix lacks arch %s (harness/arch has it)", a)
		}
	}
	for _, cmd := range []string{"make deps", "make fth"} {
		if !j.runs(cmd) {
			t.Errorf("race job does not run %s", cmd)
		}
	}
	if _, ok := j.step(func(s step) bool {
		return strings.Contains(s.Run, "fth matrix") && strings.Contains(s.Run, "--file tests/matrix/race.yaml") && strings.Contains(s.Run, `--arches "${{ matrix.arch }}"`)
	}); !ok {
		t.Error("race job does not run fth matrix --file tests/matrix/race.yaml for its arch")
	}
	spec, err := matrix.LoadFile(filepath.Join(root, "tests", "matrix", "race.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if p := spec.Params; p.Scenario != "race" || p.Agent["racetarget"] != "all" || p.Agent["injections"] != "all" || p.Agent["raceaction"] != "replace,detach" {
		t.Errorf("race.yaml: scenario %q, agent %v: want the race scenario at every point of every target, both actions", p.Scenario, p.Agent)
	}
}

// TestNightlyRunsTheSyncMutantsOnKVM: the INT3 sync mutants that need a
// real CPU (their absence shows only as a stale instruction fetch, which
// TCG cannot give: docs/mutation.md) run nightly on KVM when the runner
// has /dev/kvm, every one the default campaign misses under TCG among
// them, against the INT3 race target, and the job says so when it has
// no KVM instead of passing in silence.
func TestNightlyRunsTheSyncMutantsOnKVM(t *testing.T) {
	w := load(t, "nightly-race.yml")
	j, ok := w.Jobs["int3-kvm"]
	if !ok {
		t.Fatal("nightly-race.yml: no int3-kvm job")
	}
	probe, ok := j.step(func(s step) bool { return strings.Contains(s.Run, "/dev/kvm") })
	if !ok || !strings.Contains(probe.Run, "GITHUB_STEP_SUMMARY") {
		t.Error("int3-kvm: no step that probes /dev/kvm and says in the summary when it is missing")
	}
	run, ok := j.step(func(s step) bool { return strings.Contains(s.Run, "fth mutate") })
	if !ok {
		t.Fatal("int3-kvm: no fth mutate step")
	}
	for _, want := range []string{"--accel kvm", "--device /dev/kvm", "racetarget=int3", "--require-detected", "make deps",
		"x86-int3-no-int3-sync", "x86-int3-no-tail-sync"} {
		if !strings.Contains(run.Run, want) {
			t.Errorf("int3-kvm's fth mutate step lacks %q", want)
		}
	}
	if !strings.Contains(run.If, "steps.kvm.outputs.have") {
		t.Errorf("int3-kvm's fth mutate step runs without KVM (if: %q)", run.If)
	}
}
