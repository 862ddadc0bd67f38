package console

import "testing"

func TestRenderTitle(t *testing.T) {
	tests := []struct {
		name   string
		tmpl   string
		groups map[string]string
		fn     string
		want   string
	}{
		{"function", "WARNING in {func}", nil, "ftrace_bug", "WARNING in ftrace_bug"},
		{"no function drops the in-clause", "BUG: soft lockup in {func}", nil, "", "BUG: soft lockup"},
		{"group and function", "ftrace bug: {what} in {func}", map[string]string{"what": "ftrace faulted on modifying"}, "do_one_initcall", "ftrace bug: ftrace faulted on modifying in do_one_initcall"},
		{"cpu number", "kernel panic: {msg}", map[string]string{"msg": "Watchdog detected hard LOCKUP on cpu 3"}, "", "kernel panic: Watchdog detected hard LOCKUP on cpu NUM"},
		{"hex value", "kernel panic: {msg}", map[string]string{"msg": "Attempted to kill init! exitcode=0x0000000b"}, "", "kernel panic: Attempted to kill init! exitcode=ADDR"},
		{"bare address", "BUG: {what}", map[string]string{"what": "TASK stack guard page was hit at ffffc900054afff8 (stack is ffffc900054b0000..ffffc900054b8000)"}, "", "BUG: TASK stack guard page was hit at ADDR (stack is ADDR..ADDR)"},
		{"symbol offset", "BUG: {what}", map[string]string{"what": "bad thing in foo+0x1a/0x40"}, "", "BUG: bad thing in foo"},
		{"pid and comm", "BUG: {what}", map[string]string{"what": "Bad page state in process syz-executor.0  pfn:1c4a8"}, "", "BUG: Bad page state in process syz-executor.NUM pfn:1c4a8"},
		{"words of hex letters stay", "BUG: {what}", map[string]string{"what": "deadbeefcafe set"}, "", "BUG: deadbeefcafe set"},
		{"function names keep digits", "WARNING in {func}", nil, "udp4_lib_lookup2", "WARNING in udp4_lib_lookup2"},
		{"missing group", "{tool}: {what} in {func}", map[string]string{"tool": "KASAN"}, "f", "KASAN: in f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := renderTitle(tt.tmpl, tt.groups, tt.fn); got != tt.want {
				t.Errorf("renderTitle(%q) = %q, want %q", tt.tmpl, got, tt.want)
			}
		})
	}
}

func TestCleanFunc(t *testing.T) {
	tests := map[string]string{
		"ftrace_bug":                         "ftrace_bug",
		"__reiserfs_panic.cold":              "__reiserfs_panic",
		"print_circular_bug.isra.36.cold.53": "print_circular_bug",
		"count_memcg_event_mm.part.0":        "count_memcg_event_mm",
		"el0_svc_common.constprop.0":         "el0_svc_common",
		"__key.49807":                        "__key",
		"udp4_lib_lookup2":                   "udp4_lib_lookup2",
	}
	for in, want := range tests {
		if got := cleanFunc(in); got != want {
			t.Errorf("cleanFunc(%q) = %q, want %q", in, got, want)
		}
	}
}
