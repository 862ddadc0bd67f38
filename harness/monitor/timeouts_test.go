package monitor

import (
	"testing"
	"time"
)

// Every wait scales with the target, the graces included; a scale of 0
// is native speed.
func TestNewTimeouts(t *testing.T) {
	def := DefaultGraces()
	for _, tt := range []struct {
		name  string
		scale float64
		want  float64
	}{
		{"a board or KVM", 1, 1},
		{"unset is native", 0, 1},
		{"arm64 under TCG", 2, 2},
		{"riscv64 under TCG", 3, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := NewTimeouts(tt.scale, 10*time.Minute, time.Minute)
			s := func(d time.Duration) time.Duration { return time.Duration(float64(d) * tt.want) }
			if got.Scale != tt.want || got.Deadline != s(10*time.Minute) || got.Silence != s(time.Minute) || got.HangTail != s(DefaultHangTail) {
				t.Errorf("NewTimeouts(%v) = %+v", tt.scale, got)
			}
			want, g := def.all(), got.Graces.all()
			for i := range want {
				if *g[i] != s(*want[i]) {
					t.Errorf("grace %d = %s, want %s scaled by %v", i, *g[i], *want[i], tt.want)
				}
			}
		})
	}
}

// A grace left zero gets its default at the timeouts' scale; one given
// is kept.
func TestTimeoutsOrDefault(t *testing.T) {
	got := Timeouts{Scale: 2, Graces: Graces{Drain: time.Millisecond}}.orDefault()
	if got.Graces.Drain != time.Millisecond || got.Graces.Panic != 30*time.Second || got.Graces.Quiet != 2*time.Second {
		t.Errorf("orDefault = %+v", got.Graces)
	}
}
