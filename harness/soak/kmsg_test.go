package soak

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/machine"
)

func TestParseKmsg(t *testing.T) {
	tests := []struct {
		in   string
		ok   bool
		line string
		seq  uint64
	}{
		{"6,1234,5678901,-;Linux version 7.3.4 (fth@fth)", true, "[    5.678901] Linux version 7.3.4 (fth@fth)", 1234},
		{"0,77,120000001,c,caller=T1;Kernel panic - not syncing: sysrq triggered crash", true, "[  120.000001] Kernel panic - not syncing: sysrq triggered crash", 77},
		{`4,9,1,-;RIP: 0010:\x09up_read+0x1/0x40`, true, "[    0.000001] RIP: 0010:\tup_read+0x1/0x40", 9},
		{" SUBSYSTEM=pci", false, "", 0},
		{"garbage", false, "", 0},
		{"6,x,1,-;text", false, "", 0},
		{`6,1,1,-;ends with \x`, true, `[    0.000001] ends with \x`, 1},
	}
	for _, tt := range tests {
		r, ok := parseKmsg(tt.in)
		if ok != tt.ok {
			t.Errorf("parseKmsg(%q) ok = %v", tt.in, ok)
			continue
		}
		if ok && (r.Line() != tt.line || r.Seq != tt.seq) {
			t.Errorf("parseKmsg(%q) = %q seq %d, want %q seq %d", tt.in, r.Line(), r.Seq, tt.line, tt.seq)
		}
	}
}

// After a blip the stream restarts from the kernel's backlog; what was
// consumed already must not reach console.log (or the detector) twice, and
// records lost in between are marked. A reboot starts the numbering again.
func TestConsumeKmsgSkipsTheBacklogAfterABlip(t *testing.T) {
	var got []string
	s := &soak{emit: func(e machine.Event) {
		if e.Kind != machine.Console {
			t.Errorf("kernel log stream emitted a %s event", e.Kind)
		}
		if rest, ok := strings.CutPrefix(e.Text, "---- fth: "); ok {
			got = append(got, rest)
			return
		}
		got = append(got, e.Text[strings.Index(e.Text, "]")+2:])
	}}
	feed := func(from, to uint64) {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "6,%d,%d,-;record %d\n", i, 1000*(i+1), i)
		}
		s.consumeKmsg(strings.NewReader(b.String()), 0)
	}
	feed(0, 3) // first session
	feed(0, 5) // after a blip: the backlog again, then two new records
	feed(8, 8) // 6 and 7 were overwritten before they were read
	s.kmsgNext.Store(0)
	feed(0, 1) // after a reboot
	want := []string{"record 0", "record 1", "record 2", "record 3", "record 4", "record 5",
		"2 kernel log records lost (overwritten before they were read) ----", "record 8", "record 0", "record 1"}
	if !slices.Equal(got, want) {
		t.Errorf("console lines %q, want %q", got, want)
	}
}

// On the first connection the kernel log already holds the boot and what
// ran before the soak: console.log gets it, the detector must not.
func TestConsumeKmsgMarksHistory(t *testing.T) {
	var hist []bool
	s := &soak{emit: func(e machine.Event) { hist = append(hist, e.History) }}
	s.consumeKmsg(strings.NewReader("6,0,1000,-;old\n6,1,5000000,-;new\n"), 2000000)
	if !slices.Equal(hist, []bool{true, false}) {
		t.Errorf("history flags %v, want [true false]", hist)
	}
}
