package multi

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
)

// specOf builds a BTF spec with one FUNC per name, in order, so that
// name i has type id 2+2i (each FUNC after its FUNC_PROTO).
func specOf(t *testing.T, names ...string) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := b.Add(&btf.Func{Name: n, Type: &btf.FuncProto{Return: (*btf.Void)(nil)}, Linkage: btf.GlobalFunc}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestIDs(t *testing.T) {
	spec := specOf(t, "a", "b", "c")
	ids, err := IDs(spec, []string{"c", "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i, fn := range []string{"c", "a"} {
		ty, err := spec.TypeByID(btf.TypeID(ids[i]))
		if err != nil || ty.TypeName() != fn {
			t.Errorf("id %d of %s names %v (%v)", ids[i], fn, ty, err)
		}
	}
	if _, err := IDs(spec, []string{"missing"}); err == nil {
		t.Error("IDs of a function without BTF: no error")
	}
}

// fakeKernel refuses any link that names a refused id, and counts what
// is open.
type fakeKernel struct {
	refused map[uint32]bool
	next    int
	open    map[int]int // fd -> functions (0 for a program)
	links   int
}

func (k *fakeKernel) link(_ Group, _ []string, ids []uint32) (func() error, unix.Errno, error) {
	k.links++
	for _, id := range ids {
		if k.refused[id] {
			return nil, unix.EINVAL, unix.EINVAL
		}
	}
	k.next++
	fd := k.next
	k.open[fd] = len(ids)
	return func() error {
		if _, ok := k.open[fd]; !ok {
			return fmt.Errorf("close %d: %w", fd, unix.EBADF)
		}
		delete(k.open, fd)
		return nil
	}, 0, nil
}

func TestHoldFindsRefusedFunctions(t *testing.T) {
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("f%02d", i))
	}
	spec := specOf(t, names...)
	ids, err := IDs(spec, names)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		chunk   int
		refused []int // indexes into names
	}{
		{"none refused", 8, nil},
		{"one in a chunk", 8, []int{3}},
		{"two chunks", 8, []int{0, 19}},
		{"one link of all", 0, []int{7, 8}},
		{"all refused", 4, []int{0, 1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &fakeKernel{refused: map[uint32]bool{}, open: map[int]int{}}
			for _, i := range tc.refused {
				k.refused[ids[i]] = true
			}
			var m emit.Memory
			cfg := Config{Emit: &m, Chunk: tc.chunk, link: k.link}
			h, ph, err := Hold(context.Background(), cfg, []Group{{Name: "vmlinux", Spec: spec, Funcs: names}})
			if err != nil {
				t.Fatal(err)
			}
			want := len(names) - len(tc.refused)
			if ph.Attempted != len(names) || ph.Succeeded != want || ph.Failed != len(tc.refused) || h.Functions != want {
				t.Errorf("phase %+v, held %d: want %d of %d, %d failed", ph, h.Functions, want, len(names), len(tc.refused))
			}
			var failed []string
			for _, e := range m.OfKind(event.KindFailure) {
				failed = append(failed, e.Failure.Function)
				if e.Failure.Errno != "EINVAL" || e.Failure.Phase != PhaseAttach {
					t.Errorf("failure %+v: want EINVAL in %s", e.Failure, PhaseAttach)
				}
			}
			var wantFailed []string
			for _, i := range tc.refused {
				wantFailed = append(wantFailed, names[i])
			}
			if !slices.Equal(failed, wantFailed) {
				t.Errorf("failures name %v, want %v", failed, wantFailed)
			}
			if len(tc.refused) == 0 && tc.chunk > 0 && k.links != (len(names)+tc.chunk-1)/tc.chunk {
				t.Errorf("%d links for %d functions %d at a time", k.links, len(names), tc.chunk)
			}
			dph, err := h.Detach()
			if err != nil {
				t.Fatal(err)
			}
			if dph.Succeeded != want || dph.Failed != 0 || dph.Attempted != want {
				t.Errorf("detach %+v: want %d", dph, want)
			}
			if len(k.open) != 0 {
				t.Errorf("left open after Detach: %v", k.open)
			}
			phases := m.OfKind(event.KindPhase)
			if len(phases) != 2 || phases[0].Phase.Name != PhaseAttach || phases[1].Phase.Name != PhaseDetach {
				t.Errorf("phases emitted: %+v", phases)
			}
		})
	}
}

func TestHoldStopsOnCancel(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	spec := specOf(t, names...)
	k := &fakeKernel{open: map[int]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var m emit.Memory
	h, ph, err := Hold(ctx, Config{Emit: &m, Chunk: 2, link: k.link}, []Group{{Name: "vmlinux", Spec: spec, Funcs: names}})
	if err == nil || ph.Succeeded != 0 {
		t.Errorf("canceled Hold: %+v, %v", ph, err)
	}
	h.Close()
	if len(k.open) != 0 {
		t.Errorf("left open after Close: %v", k.open)
	}
}

// TestAddGrowsOneHeld: functions added in steps are held by one Held,
// whose Detach closes all of them in one phase; a link failure that is
// not a refusal of its functions (no errno) stops the phase instead of
// being split.
func TestAddGrowsOneHeld(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	spec := specOf(t, names...)
	k := &fakeKernel{refused: map[uint32]bool{}, open: map[int]int{}}
	var m emit.Memory
	h, ph, err := Hold(context.Background(), Config{Emit: &m, Chunk: 2, link: k.link}, []Group{{Name: "vmlinux", Spec: spec, Funcs: names[:3]}})
	if err != nil || ph.Succeeded != 3 {
		t.Fatalf("Hold: %+v, %v", ph, err)
	}
	if ph, err = h.Add(context.Background(), []Group{{Name: "vmlinux", Spec: spec, Funcs: names[3:]}}); err != nil || ph.Succeeded != 2 || h.Functions != 5 {
		t.Fatalf("Add: %+v, %v; %d held", ph, err, h.Functions)
	}
	if dph, err := h.Detach(); err != nil || dph.Succeeded != 5 || len(k.open) != 0 {
		t.Errorf("Detach: %+v, %v; open %v", dph, err, k.open)
	}

	unsupported := func(Group, []string, []uint32) (func() error, unix.Errno, error) {
		return nil, 0, fmt.Errorf("no kprobe_multi here")
	}
	calls := 0
	counted := func(g Group, f []string, ids []uint32) (func() error, unix.Errno, error) {
		calls++
		return unsupported(g, f, ids)
	}
	h, ph, err = Hold(context.Background(), Config{Emit: &m, Kind: Kprobe, link: counted}, []Group{{Name: "vmlinux", Funcs: names}})
	if err == nil || calls != 1 || ph.Failed != 0 || h.Functions != 0 {
		t.Errorf("a kernel without the link kind: %+v, %v after %d calls; want one call and an error", ph, err, calls)
	}
}

// TestLoadProgramMarshals: the program marshals in the machine's byte
// order; what the kernel says of it is the kernel's (a refusal, with an
// errno, where the kernel lacks tracing_multi or the test is not root).
func TestLoadProgramMarshals(t *testing.T) {
	fd, err := LoadProgram(0)
	if err == nil {
		unix.Close(fd)
		return
	}
	if !Refused(err) {
		t.Errorf("LoadProgram: %v: not a refusal by the kernel", err)
	}
}

// TestHoldEOPNOTSUPPIsTheKind: a link refused with EOPNOTSUPP is the
// kernel lacking the link kind (arm64's 7.3 refuses every tracing_multi
// link so): one attempt, a refusal HoldBest falls back on, and no
// failure per function.
func TestHoldEOPNOTSUPPIsTheKind(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	spec := specOf(t, names...)
	calls := 0
	noKind := func(Group, []string, []uint32) (func() error, unix.Errno, error) {
		calls++
		return nil, unix.EOPNOTSUPP, unix.EOPNOTSUPP
	}
	var m emit.Memory
	h, ph, err := Hold(context.Background(), Config{Emit: &m, link: noKind}, []Group{{Name: "vmlinux", Spec: spec, Funcs: names}})
	if err == nil || !Refused(err) || calls != 1 || ph.Failed != 0 || h.Functions != 0 || len(m.OfKind(event.KindFailure)) != 0 {
		t.Errorf("Hold: %+v, %v after %d calls, %d failures; want one refused call", ph, err, calls, len(m.OfKind(event.KindFailure)))
	}
}

func TestOwnFirst(t *testing.T) {
	inMod := func(fn string) bool { return fn[0] == 'm' }
	got := OwnFirst([]string{"m1", "a", "m2", "b", "c"}, inMod)
	if want := []string{"a", "b", "c", "m1", "m2"}; !slices.Equal(got, want) {
		t.Errorf("OwnFirst = %v, want %v", got, want)
	}
}
