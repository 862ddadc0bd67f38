package oracle

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/stress/ksyms"
)

// Loader loads func-ip programs. Calibrate it (or leave it unchecked)
// before sharing it between goroutines: afterwards it is read-only, apart
// from the Map's slot table, which locks.
type Loader struct {
	// Map is where the programs count.
	Map *Map
	// Cache is the parsed kernel BTF shared with every other load.
	Cache *btf.Cache
	// Addrs are the kallsyms addresses of the functions to trace; nil
	// when kallsyms hides them, and programs then only count hits.
	Addrs ksyms.Table
	// Skew is added to every expected address: non-zero only in the
	// test-only wrong-ip sabotage, which must make every check fail.
	Skew uint64
	// Serial, when set, is held around every load by this loader and its
	// WithAddrs copies. cilium/ebpf v0.22.0's btf.Cache hands out module
	// specs whose decoder inflates vmlinux types without the vmlinux
	// decoder's lock, so a load on a module's function racing one on
	// vmlinux's killed the agent (fatal error: concurrent map writes,
	// seen in the campaign's churn).
	Serial *sync.Mutex

	delta    int64
	checking bool
}

// NewLoader returns a loader counting in a new map of slots slots, sharing
// cache (a new one when nil). Close releases the map.
func NewLoader(slots int, cache *btf.Cache) (*Loader, error) {
	m, err := NewMap(slots)
	if err != nil {
		return nil, err
	}
	if cache == nil {
		cache = btf.NewCache()
	}
	return &Loader{Map: m, Cache: cache}, nil
}

// Close releases the loader's map; copies from WithAddrs share it.
func (l *Loader) Close() error { return l.Map.Close() }

// Checking reports whether programs compare addresses: only after a
// successful calibration.
func (l *Loader) Checking() bool { return l.checking }

// Delta is the calibrated offset of bpf_get_func_ip from kallsyms.
func (l *Loader) Delta() int64 { return l.delta }

// Expected returns the address a program on fn must see.
func (l *Loader) Expected(fn string) (uint64, bool) {
	a, ok := l.Addrs.Addr(fn)
	if !ok {
		return 0, false
	}
	return uint64(int64(a)+l.delta) + l.Skew, true
}

// WithAddrs returns a loader sharing l's map, cache and calibration but
// expecting the addresses in addrs: a module's functions move on every
// load, so each load gets a loader of its own.
func (l *Loader) WithAddrs(addrs ksyms.Table) *Loader {
	c := *l
	c.Addrs = addrs
	return &c
}

// Loaded is a loaded, not yet attached, func-ip program.
type Loaded struct {
	Prog   *ebpf.Program
	Func   string
	Kind   Kind
	FuncIP FuncIP
}

// Key is the slot key of kind on fn: every program of that kind ever
// attached to fn counts in the same slot, so a mismatch names the function
// and kind even if the program that saw it is gone.
func Key(kind Kind, fn string) string { return kind.String() + ":" + fn }

// Load loads a func-ip program for fn counting in the slot of key. It
// compares addresses when the loader is calibrated; a function without a
// kallsyms address then fails with ErrNoAddress rather than load a program
// whose every hit would be a false mismatch.
func (l *Loader) Load(fn string, kind Kind, key string) (*Loaded, error) {
	return l.load(fn, kind, key, l.checking)
}

func (l *Loader) load(fn string, kind Kind, key string, check bool) (*Loaded, error) {
	slot, err := l.Map.Slot(key)
	if err != nil {
		return nil, fmt.Errorf("oracle.Load %s %s: %w", kind, fn, err)
	}
	p := FuncIP{MapFD: l.Map.FD(), Slot: slot, Check: check}
	if check {
		exp, ok := l.Expected(fn)
		if !ok {
			return nil, fmt.Errorf("oracle.Load %s %s: %w", kind, fn, ErrNoAddress)
		}
		p.Expected = exp
	}
	// A one-program collection rather than NewProgram: only
	// CollectionOptions carries the shared btf.Cache that resolves the
	// attach target without parsing vmlinux BTF again.
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"p": p.Spec(fn, kind)}}
	if l.Serial != nil {
		l.Serial.Lock()
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Cache: l.Cache})
	if l.Serial != nil {
		l.Serial.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("oracle.Load %s %s: %w", kind, fn, err)
	}
	prog := coll.DetachProgram("p")
	coll.Close()
	return &Loaded{Prog: prog, Func: fn, Kind: kind, FuncIP: p}, nil
}
