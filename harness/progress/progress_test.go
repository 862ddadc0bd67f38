package progress

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestPlainLinesAreRateLimited(t *testing.T) {
	var logs bytes.Buffer
	r := New(&bytes.Buffer{}, false, slog.New(slog.NewTextHandler(&logs, nil)))
	clock := time.Unix(0, 0)
	r.now = func() time.Time { return clock }
	for i := range 10 {
		r.Update("attach", i*100, 1000, "fn")
		clock = clock.Add(time.Second)
	}
	r.Update("attach", 1000, 1000, "") // the end always shows
	got := strings.Count(logs.String(), "msg=progress")
	if got != 3 { // at 0 s, at 5 s, and the final 1000/1000
		t.Errorf("%d plain lines, want 3:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "percent=100%") {
		t.Errorf("no final line:\n%s", logs.String())
	}
	// 500 of 1000 done 5 s after the first update: 5 s to go.
	if !strings.Contains(logs.String(), "percent=50% eta=5s") {
		t.Errorf("no ETA at half way:\n%s", logs.String())
	}
}

func TestTerminalDrawsABar(t *testing.T) {
	var out bytes.Buffer
	r := New(&out, true, slog.New(slog.DiscardHandler))
	r.Update("x86_64 build", 5, 0, "CC kernel/fork.o")
	r.Update("x86_64 build", 6, 0, "CC kernel/exit.o")
	r.Done("x86_64 build")
	if !strings.Contains(out.String(), "x86_64 build") {
		t.Errorf("no bar drawn: %q", out.String())
	}
	var nilR *Reporter
	nilR.Update("x", 1, 2, "") // must not panic
	nilR.Done("x")
}

func TestETA(t *testing.T) {
	for _, tt := range []struct {
		name        string
		done, total int
		elapsed     time.Duration
		want        time.Duration
		ok          bool
	}{
		{"a quarter done", 250, 1000, time.Minute, 3 * time.Minute, true},
		{"half done", 5, 10, 10 * time.Second, 10 * time.Second, true},
		{"nothing done yet", 0, 1000, time.Minute, 0, false},
		{"unknown total", 10, 0, time.Minute, 0, false},
		{"past an estimated total", 1100, 1000, time.Minute, time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ETA(tt.done, tt.total, tt.elapsed)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ETA(%d, %d, %s) = %s, %v; want %s, %v", tt.done, tt.total, tt.elapsed, got, ok, tt.want, tt.ok)
			}
		})
	}
}
