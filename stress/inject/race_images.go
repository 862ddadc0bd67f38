package inject

import (
	"fmt"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/ksyms"
)

// imageWait bounds how long an attach's image takes to be announced: the
// kernel registers it before the attach returns.
const imageWait = 10 * time.Second

// imageFinder finds the image an attach or enable just made: from the
// kernel's symbol events (PERF_RECORD_KSYMBOL), which name it with its
// address the moment it is registered, or, where those cannot be watched,
// by reading kallsyms before and after (about 4 s a read under TCG, and
// ambiguous when a new image takes a freed one's place: newImage).
type imageFinder struct {
	// name is the image's symbol prefix, and scan lists the images of
	// kallsyms by address.
	name string
	scan func() (map[uint64]string, error)

	watch *ksyms.Watcher
	// before and detached are the kallsyms way's state (newImage).
	before   map[uint64]string
	detached map[uint64]bool
}

// newImageFinder starts watching the kernel's symbols, or lists the
// images already in kallsyms when it cannot.
func (r *Injector) newImageFinder(name string, scan func() (map[uint64]string, error)) (*imageFinder, error) {
	f := &imageFinder{name: name, scan: scan, detached: map[uint64]bool{}}
	w, err := ksyms.Watch()
	if err == nil {
		f.watch = w
		emit.Logf(r.env.W, "race: %s images found by the kernel's symbol events", name)
		return f, nil
	}
	emit.Logf(r.env.W, "race: no symbol events (%v): reading %s after each attach", err, ksyms.DefaultPath)
	if f.before, err = scan(); err != nil {
		return nil, err
	}
	emit.Logf(r.env.W, "race: %d %s images listed before the first", len(f.before), name)
	return f, nil
}

// prepare forgets what came before the attach the next found is for.
func (f *imageFinder) prepare() error {
	if f.watch == nil {
		return nil
	}
	_, err := f.watch.Drain()
	return err
}

// found returns the image the last attach made: its address, symbol and
// the length the kernel gave (0 when unknown).
func (f *imageFinder) found() (uint64, string, int, error) {
	if f.watch != nil {
		e, err := f.watch.Wait(imageWait, func(e ksyms.Event) bool {
			return !e.Unregister && strings.HasPrefix(e.Name, f.name)
		})
		if err != nil {
			return 0, "", 0, fmt.Errorf("race: no new %s image announced: %w", f.name, err)
		}
		return e.Addr, e.Name, int(e.Len), nil
	}
	addr, sym, after, err := newImage(f.scan, f.name, f.before, f.detached)
	if err != nil {
		return 0, "", 0, err
	}
	f.before = after
	f.detached[addr] = true
	return addr, sym, 0, nil
}

// relist lists kallsyms again after an action made an image of its own
// (a replacement): listed, and detached like every image here, it cannot
// pass for the next attach's while it waits to be freed. The symbol
// events need nothing: prepare forgets it.
func (f *imageFinder) relist() error {
	if f.watch != nil {
		return nil
	}
	var err error
	if f.before, err = f.scan(); err != nil {
		return err
	}
	for a := range f.before {
		f.detached[a] = true
	}
	return nil
}

func (f *imageFinder) close() {
	if f.watch != nil {
		_ = f.watch.Close()
	}
}
