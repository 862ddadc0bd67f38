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
