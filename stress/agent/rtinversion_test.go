package main

import "testing"

func TestStatTicks(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       int64
		wantErr    bool
	}{
		// A host's /proc/1/stat: utime 2081, stime 14021.
		{name: "a real line", stat: "1 (process_api) S 0 0 0 0 -1 4194560 156656 1358014815 0 128506 2081 14021 5782203 826593 10 -10 13 0 23 38461440 2277 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n", want: 16102},
		// Spaces and a parenthesis in the name must not shift the fields.
		{name: "a name with ') '", stat: "70 (a) b c) R 1 1 0 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 0 0 0", want: 10},
		{name: "truncated", stat: "70 (uinit) R 1 1 0", wantErr: true},
		{name: "no name", stat: "70 uinit R", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statTicks(tc.stat)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("statTicks = %d, %v; want %d (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
