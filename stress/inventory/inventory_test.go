package inventory

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// Hand-made BTF types, shaped as vmlinux has them.
var (
	intT   = &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	u64    = &btf.Int{Name: "long long unsigned int", Size: 8}
	u128   = &btf.Int{Name: "__int128 unsigned", Size: 16}
	boolT  = &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool}
	size   = &btf.Typedef{Name: "size_t", Type: u64}
	task   = &btf.Struct{Name: "task_struct", Size: 64}
	ptask  = &btf.Pointer{Target: task}
	cptask = &btf.Pointer{Target: &btf.Const{Type: task}}
	state  = &btf.Enum{Name: "state", Size: 4, Values: []btf.EnumValue{{Name: "A", Value: 0}}}
	big    = &btf.Enum{Name: "big", Size: 8}
	pair   = &btf.Struct{Name: "pair", Size: 16, Members: []btf.Member{{Name: "a", Type: u64}, {Name: "b", Type: u64, Offset: 64}}}
	un     = &btf.Union{Name: "u", Size: 8}
	dbl    = &btf.Float{Name: "double", Size: 8}
	arr    = &btf.Array{Index: intT, Type: intT, Nelems: 4}
	void   = (*btf.Void)(nil)
)

func params(ts ...btf.Type) []btf.FuncParam {
	out := make([]btf.FuncParam, len(ts))
	for i, t := range ts {
		out[i] = btf.FuncParam{Name: string(rune('a' + i)), Type: t}
	}
	return out
}

func fn(name string, ret btf.Type, ps ...btf.Type) *btf.Func {
	return &btf.Func{Name: name, Linkage: btf.GlobalFunc, Type: &btf.FuncProto{Return: ret, Params: params(ps...)}}
}

func TestCheckSignature(t *testing.T) {
	f := Filter{MaxArgs: 6}
	tests := []struct {
		name string
		fn   *btf.Func
		want Reason
	}{
		{"void()", fn("a", void), ""},
		{"nil return", fn("a", nil, intT), ""},
		{"int(ptr,size_t,bool)", fn("a", intT, ptask, size, boolT), ""},
		{"const ptr", fn("a", void, cptask), ""},
		{"enum", fn("a", state, state, big), ""},
		{"typedef and const wrap ints", fn("a", &btf.Const{Type: size}, &btf.Volatile{Type: size}), ""},
		{"ptr return", fn("a", ptask), ""},
		{"six args", fn("a", void, intT, intT, intT, intT, intT, intT), ""},
		{"seven args", fn("a", void, intT, intT, intT, intT, intT, intT, intT), TooManyArgs},
		{"variadic", fn("printk", intT, ptask, void), Variadic},
		{"variadic nil type", fn("printk", intT, ptask, nil), Variadic},
		{"struct by value", fn("a", void, pair), StructArg},
		{"typedef to struct by value", fn("a", void, &btf.Typedef{Name: "pair_t", Type: pair}), StructArg},
		{"union by value", fn("a", void, un), StructArg},
		{"float arg", fn("a", void, dbl), BadArg},
		{"array arg", fn("a", void, arr), BadArg},
		{"int128 arg", fn("a", void, u128), BadArg},
		{"struct return", fn("a", pair), StructReturn},
		{"union return", fn("a", un), StructReturn},
		{"float return", fn("a", dbl), BadReturn},
		{"int128 return", fn("a", u128), BadReturn},
		{"no proto", &btf.Func{Name: "a", Type: intT}, NoProto},
		{"nil proto", &btf.Func{Name: "a", Type: (*btf.FuncProto)(nil)}, NoProto},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, detail := f.CheckSignature(tt.fn)
			if got != tt.want {
				t.Errorf("CheckSignature = %q (%s), want %q", got, detail, tt.want)
			}
		})
	}
	// The limit is a parameter.
	if r, _ := (Filter{MaxArgs: 8}).CheckSignature(fn("a", void, intT, intT, intT, intT, intT, intT, intT)); r != "" {
		t.Errorf("MaxArgs 8 rejected 7 args: %s", r)
	}
	if r, _ := (Filter{MaxArgs: 0}).CheckSignature(fn("a", void, intT)); r != TooManyArgs {
		t.Errorf("MaxArgs 0 accepted 1 arg: %q", r)
	}
}

func TestParseAvailable(t *testing.T) {
	in := strings.Join([]string{
		"do_one_initcall",
		"run_init_process",
		"ext4_sync_fs [ext4]",
		"dup_static",
		"dup_static",
		"ffffffff81001000 with_addr",
		"ffffffff81002000 mod_with_addr [virtio_net]",
		"",
		"  add  ", // short hex-looking name, not an address
		"deadbeef",
	}, "\n")
	a, err := ParseAvailable(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if a.Entries != 9 {
		t.Errorf("Entries = %d, want 9", a.Entries)
	}
	want := map[string]int{"do_one_initcall": 1, "run_init_process": 1, "dup_static": 2, "with_addr": 1, "add": 1, "deadbeef": 1}
	if !reflect.DeepEqual(a.Vmlinux, want) {
		t.Errorf("Vmlinux = %v, want %v", a.Vmlinux, want)
	}
	wantMods := map[string]map[string]int{"ext4": {"ext4_sync_fs": 1}, "virtio_net": {"mod_with_addr": 1}}
	if !reflect.DeepEqual(a.Modules, wantMods) {
		t.Errorf("Modules = %v, want %v", a.Modules, wantMods)
	}
}

// TestComputeModule: a requested module's functions are candidates under
// the same checks, plus one of their own (a name vmlinux has too); other
// modules' functions never are.
func TestComputeModule(t *testing.T) {
	avail := Available{
		Entries: 7,
		Vmlinux: map[string]int{"good_a": 1},
		Modules: map[string]map[string]int{
			"fth_scale": {"fth_scale_0000": 1, "fth_scale_0001": 1, "nobtf": 1, "dupf": 2, "good_a": 1},
			"ext4":      {"ext4_sync_fs": 1},
		},
	}
	res, err := Compute(Input{
		Available: avail,
		BTF:       MapSource{"good_a": {fn("good_a", void)}},
		Modules: map[string]FuncSource{"fth_scale": MapSource{
			"fth_scale_0000": {fn("fth_scale_0000", intT, intT)},
			"fth_scale_0001": {fn("fth_scale_0001", intT, intT)},
			"dupf":           {fn("dupf", void)},
			"good_a":         {fn("good_a", void)},
		}},
		Filter: Filter{MaxArgs: 6},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"good_a", "fth_scale_0000", "fth_scale_0001"}; !slices.Equal(res.Candidates, want) {
		t.Errorf("Candidates = %v, want %v", res.Candidates, want)
	}
	if want := map[Reason]int{NoBTF: 1, DupFtrace: 1, DupKallsyms: 1}; !reflect.DeepEqual(res.Rejected, want) {
		t.Errorf("Rejected = %v, want %v", res.Rejected, want)
	}
}

func TestParseKallsyms(t *testing.T) {
	in := "ffffffff81000000 T _stext\n" +
		"ffffffff81001000 t helper\n" +
		"ffffffff81002000 t helper\n" +
		"ffffffff81003000 T once\n" +
		"ffffffffc0000000 t helper\t[ext4]\n" +
		"bad line\n"
	got, err := ParseKallsyms(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"_stext": 1, "helper": 2, "once": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestCompute(t *testing.T) {
	avail := Available{
		Entries: 12,
		Vmlinux: map[string]int{
			"good_a": 1, "good_b": 1, "nobtf": 1, "dupf": 2, "dupb": 1, "dupk": 1,
			"migrate_disable": 1, "__bpf_prog_enter_recur": 1, "manyargs": 1, "byval": 1,
		},
	}
	src := MapSource{
		"good_a":                 {fn("good_a", intT, ptask)},
		"good_b":                 {fn("good_b", void)},
		"dupf":                   {fn("dupf", void)},
		"dupb":                   {fn("dupb", void), fn("dupb", intT)},
		"dupk":                   {fn("dupk", void)},
		"migrate_disable":        {fn("migrate_disable", void)},
		"__bpf_prog_enter_recur": {fn("__bpf_prog_enter_recur", u64, ptask)},
		"manyargs":               {fn("manyargs", void, intT, intT, intT, intT, intT, intT, intT)},
		"byval":                  {fn("byval", void, pair)},
		"not_traceable":          {fn("not_traceable", void)},
	}
	res, err := Compute(Input{
		Available: avail,
		BTF:       src,
		Kallsyms:  map[string]int{"good_a": 1, "dupk": 2},
		Filter:    Filter{MaxArgs: 6, Deny: DefaultDeny},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"good_a", "good_b"}; !slices.Equal(res.Candidates, want) {
		t.Errorf("Candidates = %v, want %v", res.Candidates, want)
	}
	if res.Traceable != 12 || res.WithBTF != 9 {
		t.Errorf("Traceable, WithBTF = %d, %d; want 12, 9", res.Traceable, res.WithBTF)
	}
	wantRej := map[Reason]int{NoBTF: 1, DupFtrace: 1, DupBTF: 1, DupKallsyms: 1, Deny: 2, TooManyArgs: 1, StructArg: 1}
	if !reflect.DeepEqual(res.Rejected, wantRej) {
		t.Errorf("Rejected = %v, want %v", res.Rejected, wantRej)
	}
	ev := res.Event(1)
	if ev.Candidates != 2 || ev.Selected != 1 || ev.Traceable != 12 || ev.WithBTF != 9 {
		t.Errorf("Event = %+v", ev)
	}

	// Without kallsyms the check is skipped.
	res, _ = Compute(Input{Available: avail, BTF: src, Filter: Filter{MaxArgs: 6, Deny: DefaultDeny}})
	if !slices.Contains(res.Candidates, "dupk") {
		t.Errorf("nil Kallsyms still rejected dupk: %v", res.Candidates)
	}
}

func TestDenyList(t *testing.T) {
	for _, d := range DefaultDeny {
		if d.Name == "" || d.Why == "" {
			t.Errorf("incomplete entry %+v", d)
		}
	}
	for name, want := range map[string]bool{
		"migrate_disable": true, "migrate_enable": true, "__rcu_read_lock": true, "__rcu_read_unlock": true,
		"preempt_count_add": true, "preempt_count_sub": true, "rcu_read_unlock_strict": true,
		"__bpf_prog_enter_sleepable_recur": true, "__bpf_prog_exit": true, "__bpf_tramp_enter": true,
		"migrate_disable_switch": false, "rcu_read_lock_held": false, "bpf_map_lookup_elem": false, "schedule": false,
	} {
		if got := Denied(DefaultDeny, name); got != want {
			t.Errorf("Denied(%s) = %v, want %v", name, got, want)
		}
	}
	// The known findings' triggers come from results/known.
	if Denied(DefaultDeny, "rcu_read_unlock_special") || !Denied(KnownDeny(DefaultDeny), "rcu_read_unlock_special") {
		t.Error("rcu_read_unlock_special must be denied through the known findings, and only there")
	}
}

// specFrom marshals types into a real BTF blob and parses it back, so the
// SpecSource path is exercised the way vmlinux BTF is.
func specFrom(t *testing.T, types ...btf.Type) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
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

func TestTakeWithSpec(t *testing.T) {
	spec := specFrom(t,
		fn("vfs_read", intT, ptask, size),
		fn("struct_arg", void, pair),
		fn("dup", void), fn("dup", intT),
		fn("printk", intT, ptask, void),
		// A non-FUNC type with a candidate's name must not count.
		&btf.Struct{Name: "vfs_read", Size: 0},
	)
	dir := t.TempDir()
	aff := filepath.Join(dir, "available_filter_functions")
	ks := filepath.Join(dir, "kallsyms")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(aff, "vfs_read\nstruct_arg\ndup\nprintk\nmissing_btf\nmodfn [mod]\n")
	write(ks, "ffffffff81000000 T vfs_read\n")
	res, err := Take(context.Background(), spec, Filter{MaxArgs: 6, Deny: DefaultDeny},
		Paths{Available: []string{filepath.Join(dir, "nope"), aff}, Kallsyms: ks}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Candidates, []string{"vfs_read"}) {
		t.Errorf("Candidates = %v", res.Candidates)
	}
	if res.Traceable != 6 || res.WithBTF != 4 {
		t.Errorf("Traceable, WithBTF = %d, %d; want 6, 4", res.Traceable, res.WithBTF)
	}
	want := map[Reason]int{StructArg: 1, DupBTF: 1, Variadic: 1, NoBTF: 1}
	if !reflect.DeepEqual(res.Rejected, want) {
		t.Errorf("Rejected = %v, want %v", res.Rejected, want)
	}

	if _, err := Take(context.Background(), spec, Filter{}, Paths{Available: []string{filepath.Join(dir, "nope")}}, nil); err == nil ||
		!strings.Contains(err.Error(), "available_filter_functions") {
		t.Errorf("missing file err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Take(ctx, spec, Filter{}, Paths{Available: []string{aff}}, nil); err == nil {
		t.Error("canceled context: no error")
	}
}

func TestMountedAndMountFSNoop(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mountinfo")
	info := "22 1 0:21 / /proc rw,nosuid - proc proc rw\n" +
		"30 22 0:7 / /sys/kernel/debug rw,nosuid shared:12 - debugfs debugfs rw\n" +
		"31 22 0:12 / /sys/kernel/tracing rw - tracefs tracefs rw\n" +
		"garbage\n"
	if err := os.WriteFile(p, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := mounted(p)
	if err != nil {
		t.Fatal(err)
	}
	if m["/sys/kernel/debug"] != "debugfs" || m["/sys/kernel/tracing"] != "tracefs" || m["/proc"] != "proc" {
		t.Errorf("mounted = %v", m)
	}
	// Everything already mounted: MountFS must not call mount(2) at all,
	// which is what makes it safe to call on a host.
	if err := MountFS(p, DefaultMounts); err != nil {
		t.Errorf("MountFS = %v", err)
	}
}
