package matrix

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/wire/event"
)

func TestParseFile(t *testing.T) {
	s, err := ParseFile("m.yaml", []byte(`
arches: [riscv64, x86_64]
variants:
  - default
  - lazy
  - name: mine
    doc: mine
    fragments: [ftrace/direct-calls, preempt/dynamic]
    preempt: lazy
    needs: [direct-calls]
    selectable: [PREEMPT_LAZY]
scenario: attach-storm
agent: {n: 500, hold: 2s, seed: 7}
accel: tcg-multi
cpus: 4
mem: 2048
deadline: 1h
silence: 2m
parallel: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	var arches []string
	for _, a := range s.Arches {
		arches = append(arches, string(a.Name))
	}
	if !slices.Equal(arches, []string{"riscv64", "x86_64"}) {
		t.Errorf("arches = %v", arches)
	}
	if !slices.Equal(s.Variants, []string{"default", "lazy", "mine"}) {
		t.Errorf("variants = %v", s.Variants)
	}
	if len(s.Custom) != 1 || s.Custom[0].Preempt != "lazy" || !slices.Equal(s.Custom[0].Fragments, []string{"ftrace/direct-calls", "preempt/dynamic"}) || s.Custom[0].Needs[0] != "direct-calls" {
		t.Errorf("custom = %+v", s.Custom)
	}
	p := s.Params
	// Keys the file leaves out keep fth run's defaults.
	wantAgent := map[string]string{"n": "500", "hold": "2s", "seed": "7", "detach": "200"}
	if p.Scenario != event.ScenarioStorm || p.Accel != qemu.AccelTCGMulti || p.CPUs != 4 || p.MemoryMB != 2048 ||
		p.Deadline != time.Hour || p.Silence != 2*time.Minute || s.Parallel != 2 || !mapsEqual(p.Agent, wantAgent) {
		t.Errorf("params = %+v, parallel %d", p, s.Parallel)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestParseFileDefaults(t *testing.T) {
	s, err := ParseFile("empty.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultSpec()
	if len(s.Arches) != len(d.Arches) || !slices.Equal(s.Variants, []string{DefaultVariants}) || s.Parallel != 1 || s.Params.CPUs != 2 {
		t.Errorf("empty file = %+v", s)
	}
	one, err := ParseFile("one.yaml", []byte("arches: all\nvariants: rt\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Arches) != len(d.Arches) || !slices.Equal(one.Variants, []string{"rt"}) {
		t.Errorf("scalars: arches %d, variants %v", len(one.Arches), one.Variants)
	}
}

func TestParseFileErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown arch names the valid ones", "arches: [x86_64, sparc64]\n",
			[]string{`m.yaml: arches: unknown architecture "sparc64": choose one of x86_64, arm64, riscv64, ppc64le, or all`}},
		{"unknown variant names the valid ones", "variants: [default, lazzy]\n",
			[]string{`m.yaml: variants: unknown variant "lazzy": choose default, all, or one of direct-calls-full, call-ops-full, no-call-ops-full, lazy,`, "kasan"}},
		{"unknown key", "arches: [x86_64]\nvariant: [rt]\n", []string{"m.yaml", "field variant not found", "known keys: arches, variants,"}},
		{"unknown key in a variant", "variants:\n  - name: x\n    fragment: [a]\n", []string{`line 3: variant key "fragment" is not one of name, doc, fragments`}},
		{"variant without fragments", "variants:\n  - name: x\n", []string{`variant "x" has no fragments`}},
		{"variant shadowing a built-in", "variants:\n  - name: rt\n    fragments: [preempt/rt]\n", []string{`variant "rt" is built in`}},
		{"variant with an unknown feature", "variants:\n  - name: x\n    fragments: [a]\n    needs: [jmp]\n", []string{`needs unknown feature "jmp"`}},
		{"bad scenario", "scenario: stress\n", []string{`unknown scenario "stress": want storm, churn, bench, race, campaign or repro`}},
		{"bad accel", "accel: hvf\n", []string{"accel:", `unknown accelerator "hvf"`}},
		{"negative cpus", "cpus: -1\n", []string{"cpus: -1 is negative"}},
		{"bad duration", "deadline: soon\n", []string{"m.yaml", "soon"}},
		{"agent value with a space", "agent: {n: 'a b'}\n", []string{"agent.n (line 1)"}},
		{"agent value not a scalar", "agent: {n: [1]}\n", []string{"agent.n"}},
		{"not yaml", "arches: [x86_64\n", []string{"m.yaml"}},
		{"bad toolchain", "toolchain: [host, gcc-13]\n", []string{`m.yaml: toolchain: unknown toolchain "gcc-13": choose one of default, host, gcc-12, gcc-14, clang-19, clang-21`}},
		{"bad qemu", "qemu: '9.0'\n", []string{`m.yaml: qemu: unknown QEMU "9.0": choose one of default, host, 7.2, 11.1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFile("m.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrBadFile) {
				t.Errorf("%v does not wrap ErrBadFile", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nlacks\n  %s", err, w)
				}
			}
		})
	}
}

func TestParseArchesAndVariants(t *testing.T) {
	a, err := ParseArches([]string{"amd64", " arm64", "x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || a[0].Name != "x86_64" || a[1].Name != "arm64" {
		t.Errorf("GOARCH spelling and repeats: %v", a)
	}
	if _, err := ParseArches(nil); err == nil {
		t.Error("no arches accepted")
	}
	if _, err := ParseVariants([]string{"rt", "mine"}, nil); !errors.Is(err, ErrUnknownVariant) {
		t.Errorf("unknown variant: %v", err)
	}
	if v, err := ParseVariants([]string{"all", " mine"}, []Variant{{Name: "mine"}}); err != nil || !slices.Equal(v, []string{"all", "mine"}) {
		t.Errorf("ParseVariants = %v, %v", v, err)
	}
}

// The example in tests/ must parse, and name only fragments that exist.
func TestNightlyFile(t *testing.T) {
	s, err := LoadFile("../../tests/matrix/nightly.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Custom {
		for _, f := range v.Fragments {
			if _, err := os.Stat("../../kconfigs/" + f); err != nil {
				t.Errorf("variant %s: %v", v.Name, err)
			}
		}
	}
}

// The toolchain and QEMU axes come from a file as lists or single values.
func TestParseFileAxes(t *testing.T) {
	s, err := ParseFile("m.yaml", []byte("toolchain: [host, gcc-14]\nqemu: '11.1'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Toolchains, []kbuild.Compiler{kbuild.CompilerHost, kbuild.GCC14}) || !slices.Equal(s.QEMUs, []qemu.Emulator{qemu.QEMU111}) {
		t.Errorf("toolchains %v, qemus %v", s.Toolchains, s.QEMUs)
	}
	d, _ := ParseFile("m.yaml", nil)
	if !slices.Equal(d.Toolchains, []kbuild.Compiler{kbuild.CompilerDefault}) || !slices.Equal(d.QEMUs, []qemu.Emulator{qemu.EmulatorDefault}) {
		t.Errorf("defaults: toolchains %v, qemus %v", d.Toolchains, d.QEMUs)
	}
}
