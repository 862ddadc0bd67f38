package oracle

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
)

// Counters is one slot of the counters map.
type Counters struct {
	Hits    uint64
	Bad     uint64
	LastBad uint64
	LastIP  uint64
}

// Sub returns c - prev for the counting fields; the address fields are c's.
func (c Counters) Sub(prev Counters) Counters {
	return Counters{Hits: c.Hits - prev.Hits, Bad: c.Bad - prev.Bad, LastBad: c.LastBad, LastIP: c.LastIP}
}

// Map is the array map every func-ip program counts in, one slot per key.
// Slots are never reset: a program detached a moment ago may still be
// running its last hit on another CPU, so readers take differences between
// two reads instead.
type Map struct {
	m *ebpf.Map

	mu    sync.Mutex
	slots map[string]uint32
}

// MapName is the counters map's kernel name.
const MapName = "fth_oracle"

// NewMap creates a map of n slots.
func NewMap(n int) (*Map, error) {
	if n < 1 {
		return nil, fmt.Errorf("oracle.NewMap: %d slots, want >= 1", n)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       MapName,
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  ValueSize,
		MaxEntries: uint32(n),
	})
	if err != nil {
		return nil, fmt.Errorf("oracle.NewMap: %w", err)
	}
	return &Map{m: m, slots: map[string]uint32{}}, nil
}

// FD is the map's file descriptor, for FuncIP.MapFD.
func (m *Map) FD() int { return m.m.FD() }

// Slot returns the slot of key, assigning the next free one on first use.
// Keys name what counts there, e.g. "fentry:vfs_read", so that every program
// ever attached to the same function with the same kind shares a slot.
func (m *Map) Slot(key string) (uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.slots[key]; ok {
		return s, nil
	}
	s := uint32(len(m.slots))
	if s >= m.m.MaxEntries() {
		return 0, fmt.Errorf("oracle.Map.Slot %s: all %d slots in use", key, m.m.MaxEntries())
	}
	m.slots[key] = s
	return s, nil
}

// Read returns the counters of slot.
func (m *Map) Read(slot uint32) (Counters, error) {
	var c Counters
	if err := m.m.Lookup(slot, &c); err != nil {
		return c, fmt.Errorf("oracle.Map.Read slot %d: %w", slot, err)
	}
	return c, nil
}

// Close releases the map. Programs still loaded keep their own reference.
func (m *Map) Close() error {
	if m == nil || m.m == nil {
		return nil
	}
	err := m.m.Close()
	m.m = nil
	if err != nil {
		return fmt.Errorf("oracle.Map.Close: %w", err)
	}
	return nil
}

// ErrNoAddress means the loader has no address for a function, so its
// program cannot compare.
var ErrNoAddress = errors.New("no unique kallsyms address")
