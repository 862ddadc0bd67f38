package shell

import "testing"

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/sys/fs/pstore/dmesg-ramoops-0": "/sys/fs/pstore/dmesg-ramoops-0",
		"it's":                           `'it'\''s'`,
		"":                               "''",
		"$(reboot)":                      "'$(reboot)'",
		"a b":                            "'a b'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
