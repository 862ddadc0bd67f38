package report

import (
	"context"
	"strings"

	"github.com/ftrace-harness/fth/results/regs"
	"github.com/ftrace-harness/fth/results/symbolize"
)

// registerLines names where each vCPU was when registers.txt (its layout
// is results/regs') was taken, and which words on top of each vCPU's stack
// point into kernel text: the return addresses of the frames below, or
// leftovers (like the kernel's own "? func" lines, they are candidates,
// not a verified unwind).
func registerLines(ctx context.Context, dump string, sym *symbolize.Symbolizer) []string {
	var out []string
	cpu, stack := "", ""
	for _, line := range strings.Split(dump, "\n") {
		if name, ok := regs.DumpCPU(line); ok {
			cpu, stack = name, ""
			continue
		}
		if name, ok := regs.ParseStackHeader(line); ok {
			stack = name
			continue
		}
		if stack != "" {
			if l, ok := stackLine(ctx, stack, line, sym); ok {
				out = append(out, l)
			}
			continue
		}
		refs := symbolize.Parse(line)
		if len(refs) == 0 || !refs[0].Register {
			continue
		}
		text := cpu + " " + refs[0].Text
		if sym != nil {
			frames, err := sym.Report(ctx, line)
			if err == nil && len(frames) > 0 {
				text += ": " + strings.Join(frames[0].Lines(), " ← ")
			}
		}
		out = append(out, strings.TrimSpace(text))
	}
	return out
}

// stackLine symbolizes one stack word, if it points into kernel text.
// Without a vmlinux nothing tells code from data, so no word is shown.
func stackLine(ctx context.Context, cpu, line string, sym *symbolize.Symbolizer) (string, bool) {
	off, word, ok := regs.ParseStackWord(line)
	if sym == nil || !ok {
		return "", false
	}
	// As a call trace line, the word is read as a return address: its
	// call is the instruction before it.
	frames, err := sym.Report(ctx, "[<"+word+">]")
	if err != nil || len(frames) == 0 || frames[0].Func == "" || frames[0].Err == symbolize.ErrNotInText.Error() {
		return "", false
	}
	return cpu + " stack " + off + " " + word + ": " + strings.Join(frames[0].Lines(), " ← "), true
}
