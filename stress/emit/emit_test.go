package emit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

// countingWriter records every Write call separately, to check that each event
// is exactly one call ending in a newline.
type countingWriter struct {
	mu     sync.Mutex
	writes [][]byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func TestWriterOneLinePerEvent(t *testing.T) {
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cw := &countingWriter{}
	w := NewWriterClock(cw, func() time.Time { return fixed })

	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := w.Emit(event.Event{Kind: event.KindProgress, Progress: &event.Progress{Phase: "attach", Done: g*1000 + i, Total: 1}})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()

	if len(cw.writes) != goroutines*each {
		t.Fatalf("got %d writes, want %d", len(cw.writes), goroutines*each)
	}
	seen := map[int]bool{}
	for _, b := range cw.writes {
		if bytes.Count(b, []byte("\n")) != 1 || b[len(b)-1] != '\n' {
			t.Fatalf("write is not exactly one line: %q", b)
		}
		var e event.Event
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("line %q: %v", b, err)
		}
		if !e.Time.Equal(fixed) {
			t.Errorf("time = %v, want %v", e.Time, fixed)
		}
		seen[e.Progress.Done] = true
	}
	if len(seen) != goroutines*each {
		t.Errorf("got %d distinct events, want %d", len(seen), goroutines*each)
	}
}

func TestWriterKeepsGivenTime(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	at := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := w.Emit(event.Event{Time: at, Kind: event.KindDone, Done: &event.Done{OK: true}}); err != nil {
		t.Fatal(err)
	}
	var e event.Event
	if err := json.Unmarshal(buf.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if !e.Time.Equal(at) || e.Kind != event.KindDone || e.Done == nil || !e.Done.OK {
		t.Errorf("round trip = %+v", e)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("port gone") }

func TestWriterRemembersFirstError(t *testing.T) {
	w := NewWriter(failWriter{})
	Logf(w, "hello %d", 1)
	if err := w.Emit(event.Event{Kind: event.KindLog, Log: "x"}); err == nil {
		t.Fatal("Emit on a failing writer returned nil")
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "port gone") {
		t.Errorf("Err = %v", err)
	}
}

func TestLogfAndMemory(t *testing.T) {
	var m Memory
	Logf(&m, "n=%d", 3)
	_ = m.Emit(event.Event{Kind: event.KindDone, Done: &event.Done{}})
	logs := m.OfKind(event.KindLog)
	if len(logs) != 1 || logs[0].Log != "n=3" {
		t.Errorf("logs = %+v", logs)
	}
	if len(m.Events()) != 2 {
		t.Errorf("events = %d", len(m.Events()))
	}
}

func TestWriterOutputIsJSONLines(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	Logf(w, "a")
	Logf(w, "b\nwith newline")
	sc := bufio.NewScanner(&buf)
	n := 0
	for sc.Scan() {
		n++
		if !json.Valid(sc.Bytes()) {
			t.Errorf("line %d not JSON: %s", n, sc.Text())
		}
	}
	if n != 2 {
		t.Errorf("got %d lines, want 2", n)
	}
}

func TestFindPortAndOpen(t *testing.T) {
	sys := t.TempDir()
	dev := t.TempDir()
	mk := func(port, name string) {
		if err := os.MkdirAll(filepath.Join(sys, port), 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "" {
			if err := os.WriteFile(filepath.Join(sys, port, "name"), []byte(name+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("vport0p0", "org.qemu.guest_agent.0")
	mk("vport0p1", "")
	mk("vport1p1", PortName)

	port, err := FindPort(sys, PortName)
	if err != nil || port != "vport1p1" {
		t.Fatalf("FindPort = %q, %v", port, err)
	}
	if _, err := FindPort(sys, "nope"); !errors.Is(err, ErrNoPort) {
		t.Errorf("FindPort(nope) err = %v, want ErrNoPort", err)
	}
	if _, err := FindPort(filepath.Join(sys, "missing"), PortName); !errors.Is(err, ErrNoPort) {
		t.Errorf("FindPort(missing dir) err = %v, want ErrNoPort", err)
	}

	// A regular file stands in for the device node.
	if err := os.WriteFile(filepath.Join(dev, "vport1p1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	ch, err := Open("", sys, dev, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Warning != "" || ch.Path != filepath.Join(dev, "vport1p1") {
		t.Errorf("channel = %+v", ch)
	}
	w := NewWriter(ch.W)
	Logf(w, "to the port")
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dev, "vport1p1"))
	if !strings.Contains(string(b), "to the port") || stdout.Len() != 0 {
		t.Errorf("port got %q, stdout got %q", b, stdout.String())
	}
}

func TestOpenFallsBackToStdout(t *testing.T) {
	var stdout bytes.Buffer
	ch, err := Open("", t.TempDir(), t.TempDir(), &stdout)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Path != "stdout" || ch.Warning == "" {
		t.Errorf("channel = %+v, want stdout with a warning", ch)
	}
	for _, name := range []string{"-", "stdout"} {
		ch, err := Open(name, "", "", &stdout)
		if err != nil || ch.Path != "stdout" || ch.Warning != "" {
			t.Errorf("Open(%q) = %+v, %v", name, ch, err)
		}
	}
}

func TestOpenExplicitPath(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	ch, err := Open(p, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	Logf(NewWriter(ch.W), "x")
	_ = ch.Close()
	if b, _ := os.ReadFile(p); !strings.HasSuffix(string(b), "\n") {
		t.Errorf("file = %q", b)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "no", "such", "dir"), "", "", nil); err == nil || !strings.Contains(err.Error(), "events=") {
		t.Errorf("Open(bad path) err = %v", err)
	}
}

func TestParseDevNumber(t *testing.T) {
	for _, tt := range []struct {
		in       string
		maj, min uint32
		ok       bool
	}{
		{"250:1\n", 250, 1, true},
		{"250", 0, 0, false},
		{"a:b", 0, 0, false},
	} {
		maj, min, ok := parseDevNumber(tt.in)
		if maj != tt.maj || min != tt.min || ok != tt.ok {
			t.Errorf("parseDevNumber(%q) = %d,%d,%v", tt.in, maj, min, ok)
		}
	}
}
