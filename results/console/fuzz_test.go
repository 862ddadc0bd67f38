package console

import (
	"os"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"\n\n",
		"[    1.0] ------------[ cut here ]------------\n[    1.1] WARNING: CPU: 0 PID: 1 at a.c:1 f+0x1/0x2\n",
		"[ 1.0][ T1] Kernel panic - not syncing: x\n[ 1.1][ T2] BUG: KASAN: use-after-free in f+0x1/0x2\n=====\n",
	} {
		f.Add([]byte(seed))
	}
	// Small real logs only: large seeds make the fuzzer spend its time minimising.
	for _, name := range []string{"testdata/x86_64/warning-interleaved-systemd", "testdata/powerpc/ftrace-bug-unknown-symbol-no-timestamps"} {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, log []byte) {
		lines := len(logLines(log))
		for _, fd := range Parse(log) {
			if fd.StartLine < 1 || fd.StartLine > fd.EndLine || fd.EndLine > lines {
				t.Fatalf("finding %q at lines %d-%d of %d", fd.Title, fd.StartLine, fd.EndLine, lines)
			}
			if n := strings.Count(fd.Report, "\n") + 1; n != fd.EndLine-fd.StartLine+1 {
				t.Fatalf("finding %q: Report has %d lines, want %d", fd.Title, n, fd.EndLine-fd.StartLine+1)
			}
		}
	})
}
