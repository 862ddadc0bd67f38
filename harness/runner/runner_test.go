package runner

import "testing"

func TestVariantName(t *testing.T) {
	tests := []struct {
		frags   []string
		preempt string
		want    string
	}{
		{[]string{"base", "arch/x86_64", "ftrace/direct-calls", "preempt/full"}, "full", "direct-calls-full"},
		{[]string{"base", "arch/x86_64", "ftrace/direct-calls", "preempt/full"}, "lazy", "direct-calls-full-boot-lazy"},
		{[]string{"base", "arch/x86_64"}, "", "base"},
		{[]string{"base", "arch/arm64", "ftrace/no-call-ops"}, "full", "no-call-ops-boot-full"},
	}
	for _, tt := range tests {
		if got := VariantName(tt.frags, tt.preempt); got != tt.want {
			t.Errorf("VariantName(%v, %q) = %q, want %q", tt.frags, tt.preempt, got, tt.want)
		}
	}
}
