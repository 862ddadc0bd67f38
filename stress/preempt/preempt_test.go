package preempt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/tally"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Models{
		"none voluntary (full) lazy\n": {Offered: []string{"none", "voluntary", "full", "lazy"}, Current: "full"},
		"(full) lazy\n":                {Offered: []string{"full", "lazy"}, Current: "full"},
		"full (lazy)":                  {Offered: []string{"full", "lazy"}, Current: "lazy"},
		"none voluntary full":          {Offered: []string{"none", "voluntary", "full"}},
		"":                             {},
	} {
		if got := Parse(in); !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// kernel73 behaves like Linux 7.3's sched_dynamic_write on an arch with
// PREEMPT_LAZY: only full and lazy exist.
type kernel73 struct {
	mu     sync.Mutex
	cur    string
	writes []string
}

func (k *kernel73) read() (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur == "full" {
		return "(full) lazy\n", nil
	}
	return "full (lazy)\n", nil
}

func (k *kernel73) write(m string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes = append(k.writes, m)
	if m != "full" && m != "lazy" {
		return fmt.Errorf("write %q: %w", m, unix.EINVAL)
	}
	k.cur = m
	return nil
}

func TestProbeAndRun(t *testing.T) {
	k := &kernel73{cur: "full"}
	rec := tally.New(nil, -1)
	s := &Switcher{Read: k.read, Write: k.write, Rec: rec}
	if err := s.Probe(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Accepted(), []string{"full", "lazy"}) {
		t.Errorf("accepted = %v", s.Accepted())
	}
	// Offered first, then the known models the file did not list; the
	// initial model is put back at the end.
	if want := []string{"full", "lazy", "none", "voluntary", "full"}; !reflect.DeepEqual(k.writes, want) {
		t.Errorf("probe writes = %v, want %v", k.writes, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, time.Millisecond, rand.New(rand.NewPCG(1, 2))); close(done) }()
	for {
		time.Sleep(2 * time.Millisecond)
		if p, ok := rec.Get(OpSwitch); ok && p.Succeeded >= 3 {
			break
		}
	}
	cancel()
	<-done
	if k.cur != "full" {
		t.Errorf("model after Run = %s, want the initial full", k.cur)
	}
	e := s.Event()
	if e.Initial != "full" || !reflect.DeepEqual(e.Offered, []string{"full", "lazy"}) ||
		!reflect.DeepEqual(e.Rejected, map[string]string{"none": "EINVAL", "voluntary": "EINVAL"}) ||
		e.Switches < 3 || e.Skipped != "" || e.Errnos != nil {
		t.Errorf("event = %+v", e)
	}
	// With two models every switch alternates.
	for i := 5; i+1 < len(k.writes)-1; i++ {
		if k.writes[i] == k.writes[i+1] {
			t.Errorf("switch %d repeats %s: %v", i, k.writes[i], k.writes)
			break
		}
	}
}

func TestProbeMissingFile(t *testing.T) {
	s := New(filepath.Join(t.TempDir(), "none"), nil)
	if err := s.Probe(); err == nil {
		t.Fatal("Probe of a missing file succeeded")
	}
	e := s.Event()
	if !strings.Contains(e.Skipped, "no preemption control") || len(e.Accepted) != 0 || e.Offered == nil {
		t.Errorf("event = %+v", e)
	}
	// Run returns at once.
	s.Run(context.Background(), time.Millisecond, rand.New(rand.NewPCG(1, 1)))
}

func TestFileWriter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "preempt")
	if err := os.WriteFile(p, []byte("(full) lazy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(p, nil)
	if err := s.Probe(); err != nil {
		t.Fatal(err)
	}
	// A plain file accepts everything; the last write is the restore.
	if b, _ := os.ReadFile(p); !strings.HasPrefix(string(b), "full\n") {
		t.Errorf("file after probe = %q", b)
	}
	if len(s.Accepted()) != 4 {
		t.Errorf("accepted = %v", s.Accepted())
	}
}

func TestPick(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		if m := pick([]string{"full", "lazy", "none"}, "lazy", rng); m == "lazy" {
			t.Fatal("pick returned the current model")
		}
	}
	if m := pick([]string{"full"}, "full", rng); m != "full" {
		t.Errorf("pick with one model = %s", m)
	}
}

func TestObserveWritesNothing(t *testing.T) {
	k := &kernel73{cur: "full"}
	s := &Switcher{Read: k.read, Write: k.write}
	if err := s.Observe(); err != nil {
		t.Fatal(err)
	}
	s.Disable("disabled (preemptevery=0)")
	s.Run(context.Background(), time.Millisecond, rand.New(rand.NewPCG(1, 1)))
	e := s.Event()
	if len(k.writes) != 0 || e.Initial != "full" || len(e.Offered) != 2 || e.Skipped != "disabled (preemptevery=0)" {
		t.Errorf("writes %v, event %+v", k.writes, e)
	}
}
