package ksyms

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const sample = `ffffffff81000000 T _stext
ffffffff81234560 T __x64_sys_getppid
ffffffff81234600 t dup_static
ffffffff81299990 t dup_static
ffffffffc0001000 t mod_func	[some_mod]
ffffffff81300000 T vfs_read
garbage line
`

func TestParse(t *testing.T) {
	tab, err := Parse(strings.NewReader(sample), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := tab.Addr("__x64_sys_getppid"); !ok || a != 0xffffffff81234560 {
		t.Errorf("getppid = %#x, %v", a, ok)
	}
	if _, ok := tab.Addr("dup_static"); ok {
		t.Error("an ambiguous name has an address")
	}
	if _, ok := tab.Addr("mod_func"); ok {
		t.Error("a module symbol was kept")
	}
	want, err := Parse(strings.NewReader(sample), map[string]bool{"vfs_read": true})
	if err != nil || len(want) != 1 || want["vfs_read"] != 0xffffffff81300000 {
		t.Errorf("filtered = %v, %v", want, err)
	}
}

func TestParseHidden(t *testing.T) {
	hidden := "0000000000000000 T _stext\n0000000000000000 T vfs_read\n"
	if _, err := Parse(strings.NewReader(hidden), nil); !errors.Is(err, ErrHidden) {
		t.Errorf("err = %v, want ErrHidden", err)
	}
}

func TestRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kallsyms")
	if err := os.WriteFile(p, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	tab, err := Read(p, []string{"vfs_read", "absent"})
	if err != nil || len(tab) != 1 {
		t.Errorf("Read = %v, %v", tab, err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none"), nil); err == nil {
		t.Error("Read of a missing file succeeded")
	}
}

func TestParseModule(t *testing.T) {
	const text = `ffffffff81000000 T _stext
ffffffffc0201000 t fth_target_hot	[fth_target]
ffffffffc0201040 t fth_target_counted	[fth_target]
ffffffffc0300000 t fth_target_hot	[other]
ffffffffc0201080 t fth_target_thread	[fth_target]
`
	got, err := ParseModule(strings.NewReader(text), "fth_target", []string{"fth_target_hot", "fth_target_counted"})
	if err != nil {
		t.Fatal(err)
	}
	want := Table{"fth_target_hot": 0xffffffffc0201000, "fth_target_counted": 0xffffffffc0201040}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseModule = %v, want %v", got, want)
	}
}

func TestEach(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       []Sym
	}{
		{"vmlinux", "ffffffff811cacf0 T bpf_trampoline_put", []Sym{{Addr: 0xffffffff811cacf0, Name: "bpf_trampoline_put"}}},
		{"a module", "ffffffffa0800100 t bpf_trampoline_10737479715\t[bpf]", []Sym{{Addr: 0xffffffffa0800100, Name: "bpf_trampoline_10737479715", Module: "bpf"}}},
		{"hidden address", "0000000000000000 T up_read", []Sym{{Name: "up_read"}}},
		{"a nameless module", "ffffffffa0800100 t x\t[]", nil},
		{"no brackets", "ffffffffa0800100 t x bpf", nil},
		{"not hex", "zz T up_read", nil},
		{"too short", "ffffffff811cacf0 T", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Sym
			if err := Each(strings.NewReader(tc.line+"\n"), func(s Sym) { got = append(got, s) }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%q: %+v, want %+v", tc.line, got, tc.want)
			}
		})
	}
}

// TestEachBeforeBPF: a reader of vmlinux's and modules' symbols stops at
// the first BPF image, so that it never pays for the kernel's quadratic
// walk of them; Each reads on to the end.
func TestEachBeforeBPF(t *testing.T) {
	text := "ffffffff81000000 T _stext\n" +
		"ffffffffa0000000 t fth_scale_0000\t[fth_scale]\n" +
		"ffffffffa0100000 t ftrace_trampoline\t[__builtin__ftrace]\n" +
		"ffffffffa0200000 t bpf_prog_6deef7357e7b4530_fth_fentry\t[bpf]\n" +
		"ffffffffa0300000 t kprobe_insn_page\t[__builtin__kprobes]\n"
	names := func(each func(io.Reader, func(Sym)) error) []string {
		var out []string
		if err := each(strings.NewReader(text), func(s Sym) { out = append(out, s.Name) }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := names(EachBeforeBPF), []string{"_stext", "fth_scale_0000", "ftrace_trampoline"}; !slices.Equal(got, want) {
		t.Errorf("EachBeforeBPF = %v, want %v", got, want)
	}
	if got := names(Each); len(got) != 5 {
		t.Errorf("Each = %v, want all 5", got)
	}
}

// TestNearest: each address is named by the closest symbol at or below
// it, a module's with its module; one below every symbol is left out.
func TestNearest(t *testing.T) {
	got, err := Nearest(strings.NewReader(sample), []uint64{0xffffffff81234570, 0xffffffff81300000, 0xffffffffc0001010, 0x1000})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{
		0xffffffff81234570: "__x64_sys_getppid+0x10",
		0xffffffff81300000: "vfs_read+0x0",
		0xffffffffc0001010: "mod_func+0x10 [some_mod]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Nearest: %v, want %v", got, want)
	}
}

// TestReadModuleReadsAgain: a read that lacks a wanted symbol (a line
// skipped while another module loaded) is made again, and one that never
// finds it stops after moduleReads.
func TestReadModuleReadsAgain(t *testing.T) {
	const with = "ffffffffc0002000 t fth_deliver_seq\t[fth_deliver]\n"
	reads := 0
	open := func(texts ...string) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) {
			reads++
			return io.NopCloser(strings.NewReader(texts[min(reads, len(texts))-1])), nil
		}
	}
	got, err := readModule(open(sample, sample, with), "fth_deliver", []string{"fth_deliver_seq"})
	if err != nil || got["fth_deliver_seq"] != 0xffffffffc0002000 || reads != 3 {
		t.Errorf("got %v, %v after %d reads, want the address at the third", got, err, reads)
	}
	reads = 0
	if got, err := readModule(open(sample), "fth_deliver", []string{"fth_deliver_seq"}); err != nil || len(got) != 0 || reads != moduleReads {
		t.Errorf("never listed: %v, %v after %d reads, want none after %d", got, err, reads, moduleReads)
	}
}
