package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/wire/event"
)

// imagePoll is how often the image watcher drains the kernel's symbol
// rings: a storm registers a trampoline and a program image per attach,
// and a ring holds a few hundred events.
const imagePoll = 50 * time.Millisecond

// trampolineImage says whether a kallsyms name is a trampoline image:
// what a task can be preempted inside and the kernel must not free under
// it.
func trampolineImage(name string) bool {
	return strings.HasPrefix(name, "bpf_trampoline_") || name == "ftrace_trampoline"
}

// watchImages streams every trampoline image the kernel registers to the
// host, as it happens (PERF_RECORD_KSYMBOL): a trap at an address no
// symbol covers is in freed memory, and the host names the image that
// last lay there (results.AttributeFreedImage). The report must be on the
// host before the kernel dies, which is soon after a free too early: the
// registration, long before, is what is sent. stop ends the watch; a
// kernel without symbol events is logged and not watched.
func (a *agent) watchImages(ctx context.Context) (stop func()) {
	w, err := ksyms.Watch()
	if err != nil {
		emit.Logf(a.w, "images: no symbol events (%v): a trap in freed trampoline memory is titled by its stack", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer w.Close()
		t := time.NewTicker(imagePoll)
		defer t.Stop()
		lost := false
		for {
			evs, err := w.Drain()
			if errors.Is(err, ksyms.ErrLost) && !lost {
				lost = true
				emit.Logf(a.w, "images: %v: some images go unnamed", err)
			}
			for _, e := range evs {
				if !e.Unregister && trampolineImage(e.Name) {
					_ = a.w.Emit(event.Event{Kind: event.KindImage, Image: &event.Image{Name: e.Name, Addr: e.Addr, Len: e.Len}})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}
