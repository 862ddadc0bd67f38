// Package mutate measures the harness's own bug-finding power: it builds
// kernels with a known patching bug put in on purpose (a mutant, one patch
// under mutants/), runs the scenario that should catch it, and says whether
// it did, how soon and with what title. The unmutated kernel runs the same
// scenario in the same run and must pass, or a detection means nothing.
package mutate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/mutation"

	"github.com/ftrace-harness/fth/results/printk"
)

// Class is the kind of patching bug a mutant puts in: the classes the
// harness exists to find. The type is the mutation table's
// (results/mutation), whose rows carry it.
type Class = mutation.Class

// The classes. Each names what a correct kernel does that the mutant does
// not.
const (
	// TrampolineFreedEarly: a BPF trampoline image or an ftrace ops
	// trampoline freed before RCU-tasks says no task can still be in it.
	TrampolineFreedEarly Class = "trampoline-freed-early"
	// PatchUnsynchronised: the steps of a live text patch (x86 INT3,
	// arm64 BL, riscv AUIPC+JALR) reordered or not synchronised.
	PatchUnsynchronised Class = "patch-unsynchronised"
	// CallOpsLiteralLate: a CALL_OPS callsite's ops literal written after
	// its branch goes live.
	CallOpsLiteralLate Class = "callops-literal-late"
	// TextMutexDropped: callsites patched without text_mutex.
	TextMutexDropped Class = "text-mutex-dropped"
	// DirectModifyUnsafe: a direct call's target changed without routing
	// the callsites through the temporary ops first.
	DirectModifyUnsafe Class = "direct-modify-unsafe"
	// TransientMisdelivery: a dispatch switch whose steps leave a user
	// that stays attached uncalled (or a user called for a function it
	// does not trace) while the switch is in flight, and the callsite
	// right afterwards: only the delivery oracle sees it.
	TransientMisdelivery Class = "transient-misdelivery"
	// SharedMisdelivery: a callsite shared by several users calls only
	// one of them for as long as they share it.
	SharedMisdelivery Class = "shared-misdelivery"
	// StaleDispatch: what a callsite calls (a record's flags, a direct
	// address) is left behind when the user it was for goes.
	StaleDispatch Class = "stale-dispatch"
	// UpdateUnlocked: an update of who a function calls made without the
	// lock that orders it against other users' updates.
	UpdateUnlocked Class = "unlocked-update"
	// ExcludedDelivery: the list function calls a user for a function
	// its filter or notrace hash excludes (one of ftrace_ops_test()'s
	// rules ignored), on a callsite other users share.
	ExcludedDelivery Class = "excluded-delivery"
)

// Classes lists every class, in the order reports show them.
var Classes = []Class{TrampolineFreedEarly, PatchUnsynchronised, CallOpsLiteralLate, TextMutexDropped, DirectModifyUnsafe, TransientMisdelivery, SharedMisdelivery, StaleDispatch, UpdateUnlocked, ExcludedDelivery}

// Mutant is one mutants/<name>.patch file.
type Mutant struct {
	Name  string
	Class Class
	// Arches it applies to (the patch touches generic code, or one arch's).
	Arches []arch.Name
	// Agent holds the agent options of the scenario that should catch it,
	// on top of DefaultAgent.
	Agent map[string]string
	// Fragments are kconfig fragments added to the arch's defaults (a
	// detection aid such as debug/lockdep).
	Fragments []string
	// Why explains the bug and how the scenario should expose it.
	Why string
	// Patch is the diff (with the header above it, which patch ignores).
	Patch []byte
	// Default says the mutant is part of `make mutation`.
	Default bool
	// Needs names what the bug needs to show at all, beyond the default
	// cell: "kvm", a real CPU, for a bug that shows only as a stale
	// instruction fetch, which QEMU's TCG cannot give (docs/mutation.md,
	// "The INT3 sync class"). Such a mutant is never Default.
	Needs string
}

// NeedsKVM is the Needs of a mutant whose bug only a real CPU can show.
const NeedsKVM = "kvm"

// DefaultAgent is the scenario every mutant runs unless its header says
// otherwise: the churn with every tracer, modules and preemption-model
// switches, for budget.
func DefaultAgent(budget time.Duration) map[string]string {
	return map[string]string{
		"scenario": "churn", "churn": budget.String(), "n": "0", "mixed": "true", "modules": "true",
	}
}

// CampaignAgent is the default campaign (what fth run and make
// test-arch run) with budget for its churn and race stages: the scenario
// whose score is the product's figure.
func CampaignAgent(budget time.Duration) map[string]string {
	return map[string]string{
		"scenario": "campaign", "budget": budget.String(), "n": matrix.DefaultParams().Agent["n"], "detach": strconv.Itoa(matrix.DefaultDetach),
	}
}

// KernelPatch is the patch kbuild applies.
func (m Mutant) KernelPatch() kbuild.Patch {
	return kbuild.Patch{Name: "mutant-" + m.Name, Text: m.Patch}
}

// ErrBadMutant is wrapped for a mutant file that cannot be used.
var ErrBadMutant = errors.New("bad mutant")

var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Load reads every *.patch under dir, sorted by name.
func Load(dir string) ([]Mutant, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no *.patch under %s", ErrBadMutant, dir)
	}
	slices.Sort(files)
	var out []Mutant
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		m, err := Parse(strings.TrimSuffix(filepath.Base(f), ".patch"), b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Parse reads a mutant: "Key: value" header lines (Mutant, Class, Arches,
// Agent, Fragments, Default, Needs, Why; a line starting with white space
// continues the previous value), then the diff.
func Parse(name string, text []byte) (Mutant, error) {
	m := Mutant{Name: name, Patch: text, Agent: map[string]string{}}
	if !nameRe.MatchString(name) {
		return m, fmt.Errorf("%w: name %q: want lower-case words joined by -", ErrBadMutant, name)
	}
	head := map[string]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "diff ") {
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if (line[0] == ' ' || line[0] == '\t') && last != "" {
			head[last] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return m, fmt.Errorf("%w: header line %q: want Key: value", ErrBadMutant, line)
		}
		last = strings.TrimSpace(k)
		head[last] = strings.TrimSpace(v)
	}
	for k := range head {
		if !slices.Contains([]string{"Mutant", "Class", "Arches", "Agent", "Fragments", "Default", "Needs", "Why"}, k) {
			return m, fmt.Errorf("%w: unknown header %q", ErrBadMutant, k)
		}
	}
	if head["Mutant"] != name {
		return m, fmt.Errorf("%w: header Mutant: %q, file name %q: they must agree", ErrBadMutant, head["Mutant"], name)
	}
	m.Class = Class(head["Class"])
	if !slices.Contains(Classes, m.Class) {
		return m, fmt.Errorf("%w: Class %q: want one of %v", ErrBadMutant, head["Class"], Classes)
	}
	for _, a := range strings.Fields(head["Arches"]) {
		if _, err := arch.Lookup(a); err != nil {
			return m, fmt.Errorf("%w: Arches: %v", ErrBadMutant, err)
		}
		m.Arches = append(m.Arches, arch.Name(a))
	}
	if len(m.Arches) == 0 {
		return m, fmt.Errorf("%w: no Arches", ErrBadMutant)
	}
	for _, kv := range strings.Fields(head["Agent"]) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return m, fmt.Errorf("%w: Agent %q: want key=value ...", ErrBadMutant, kv)
		}
		m.Agent[k] = v
	}
	m.Fragments = strings.Fields(head["Fragments"])
	if d := head["Default"]; d != "" {
		var err error
		if m.Default, err = strconv.ParseBool(d); err != nil {
			return m, fmt.Errorf("%w: Default %q: want true or false", ErrBadMutant, d)
		}
	}
	switch m.Needs = head["Needs"]; m.Needs {
	case "":
	case NeedsKVM:
		if m.Default {
			return m, fmt.Errorf("%w: Needs: kvm with Default: true: a bug TCG cannot show would count as a miss in every TCG score", ErrBadMutant)
		}
	default:
		return m, fmt.Errorf("%w: Needs %q: want kvm or nothing", ErrBadMutant, m.Needs)
	}
	m.Why = head["Why"]
	if m.Why == "" {
		return m, fmt.Errorf("%w: no Why: say what the bug is and how the scenario should catch it", ErrBadMutant)
	}
	if _, err := kbuild.PatchedFiles(text); err != nil {
		return m, fmt.Errorf("%w: %w", ErrBadMutant, err)
	}
	return m, nil
}

// Select returns the mutants named (all defaults when names is empty, every
// mutant for "all") that apply to a.
func Select(ms []Mutant, names []string, a arch.Name) ([]Mutant, error) {
	var out []Mutant
	for _, n := range names {
		if n != "all" && !slices.ContainsFunc(ms, func(m Mutant) bool { return m.Name == n }) {
			var known []string
			for _, m := range ms {
				known = append(known, m.Name)
			}
			return nil, fmt.Errorf("%w: no mutant %q (there are: %s)", ErrBadMutant, n, strings.Join(known, ", "))
		}
	}
	for _, m := range ms {
		if !slices.Contains(m.Arches, a) {
			continue
		}
		switch {
		case len(names) == 0 && m.Default, slices.Contains(names, "all"), slices.Contains(names, m.Name):
			out = append(out, m)
		}
	}
	return out, nil
}

// Judge turns a cell's result into a row. A failure counts as a detection
// when its headline (results.Result.Headline, known findings not counted)
// is the kernel's: a console finding, or a failed oracle, liveness or agent
// check. A known or induced finding never counts, nor does an error: that
// is the harness's.
func Judge(r results.Result) mutation.Row {
	row := mutation.Row{Arch: r.Arch, Verdict: r.Verdict, Reason: r.Reason, Cell: r.Cell, Seed: r.Seed}
	h := r.Headline(false)
	if r.Verdict != results.Fail || !h.Counted {
		return row
	}
	row.Detected, row.Title = true, h.Title
	row.Seconds = r.Timings.GuestSeconds
	if h.Finding == nil {
		// An oracle's failure: when it came, not when the cell ended.
		if r.Timings.OracleFailedSeconds > 0 {
			row.Seconds = r.Timings.OracleFailedSeconds
		}
		return row
	}
	for _, line := range strings.Split(h.Finding.Report, "\n") {
		if p, ok := printk.Split(strings.TrimSpace(line)); ok {
			row.Seconds, _ = strconv.ParseFloat(p.Stamp, 64)
			break
		}
	}
	return row
}
