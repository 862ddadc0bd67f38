package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestWatchStdinStopsOnEOF(t *testing.T) {
	r, w := io.Pipe()
	var log bytes.Buffer
	ctx, cancel := watchStdin(t.Context(), r, &log)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Fatal("stopped while stdin was still open")
	case <-time.After(50 * time.Millisecond):
	}
	w.Close() // the SSH session dropped
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("did not stop on stdin EOF")
	}
	if !strings.Contains(log.String(), "stdin closed") {
		t.Errorf("log %q does not say why", log.String())
	}
}
