package ssh

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeBoard is a connection to a board whose boot_id read may fail.
type fakeBoard struct {
	id     string
	err    error
	closed bool
}

func (f *fakeBoard) BootID(context.Context) (string, error) { return f.id, f.err }
func (f *fakeBoard) Close() error                           { f.closed = true; return nil }

func TestWaitBack(t *testing.T) {
	const prev = "11111111-1111-4111-8111-111111111111"
	const next = "22222222-2222-4222-8222-222222222222"
	errRefused := errors.New("ssh dial ssh://root@board:22: connection refused")
	fast := Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Tries: 5}

	// step is what one dial gives: a board, or an error.
	type step struct {
		board *fakeBoard
		err   error
	}
	refused := step{err: errRefused}
	for _, tc := range []struct {
		name        string
		steps       []step // the last one repeats
		cancelAfter int    // cancel ctx during this dial; 0: never
		prev        string
		wantErr     []string
		wantIs      error
		want        Comeback // Waited is not compared
		closed      []int    // steps whose board must have been closed
	}{
		{name: "network blip", steps: []step{{board: &fakeBoard{id: prev}}},
			want: Comeback{Rebooted: false, BootID: prev, Tries: 1}},
		{name: "reboot", steps: []step{refused, refused, {board: &fakeBoard{id: next}}},
			want: Comeback{Rebooted: true, BootID: next, Tries: 3}},
		{name: "boot_id unreadable at first", steps: []step{{board: &fakeBoard{err: errors.New("cat: no such file")}}, {board: &fakeBoard{id: next}}},
			want: Comeback{Rebooted: true, BootID: next, Tries: 2}, closed: []int{0}},
		{name: "never comes back", steps: []step{refused},
			wantErr: []string{"gave up after 5 tries", "ssh://root@board:22", "connection refused"}, wantIs: errRefused,
			want: Comeback{Tries: 5}},
		{name: "ctx cancelled", steps: []step{refused}, cancelAfter: 2,
			wantErr: []string{"after 2 tries", "connection refused"}, wantIs: context.Canceled,
			want: Comeback{Tries: 2}},
		{name: "no previous boot_id", prev: "-", steps: []step{{board: &fakeBoard{id: prev}}},
			wantErr: []string{"previous boot_id is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			dials := 0
			dial := func(context.Context) (bootIDer, error) {
				s := tc.steps[min(dials, len(tc.steps)-1)]
				dials++
				if dials == tc.cancelAfter {
					cancel()
				}
				if s.err != nil {
					return nil, s.err
				}
				return s.board, nil
			}
			prevID := prev
			if tc.prev == "-" {
				prevID = ""
			}
			c, cb, err := waitBack(ctx, prevID, fast, dial, testLogger(t))
			cb.Waited = 0
			if cb != tc.want {
				t.Errorf("Comeback = %+v, want %+v", cb, tc.want)
			}
			for _, i := range tc.closed {
				if !tc.steps[i].board.closed {
					t.Errorf("the board of dial %d was not closed", i)
				}
			}
			if tc.wantErr == nil {
				if err != nil || c == nil {
					t.Fatalf("waitBack = %v, %v", c, err)
				}
				return
			}
			if err == nil || c != nil {
				t.Fatalf("waitBack = %v, %v; want an error", c, err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v is not %v", err, tc.wantIs)
			}
		})
	}
}

func TestBackoffDelays(t *testing.T) {
	b := Backoff{Initial: 2 * time.Second, Max: 30 * time.Second, Tries: 40}
	for _, tc := range []struct {
		try  int
		want time.Duration
	}{
		{1, 0}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second},
		{5, 16 * time.Second}, {6, 30 * time.Second}, {40, 30 * time.Second},
	} {
		if got := b.delay(tc.try); got != tc.want {
			t.Errorf("delay before try %d = %s, want %s", tc.try, got, tc.want)
		}
	}
}

func TestWaitBackWaits(t *testing.T) {
	// 4 tries wait 10+20+40 ms in between.
	b := Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Tries: 4}
	_, cb, err := waitBack(t.Context(), "x", b, func(context.Context) (bootIDer, error) {
		return nil, errors.New("down")
	}, testLogger(t))
	if err == nil || cb.Tries != 4 {
		t.Fatalf("waitBack: tries %d, err %v", cb.Tries, err)
	}
	if cb.Waited < 70*time.Millisecond {
		t.Errorf("Waited = %s, want at least the 70ms of delays", cb.Waited)
	}
}

func TestBackoffDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want Backoff
	}{
		{Backoff{}, Backoff{2 * time.Second, 30 * time.Second, 40}},
		{Backoff{Initial: time.Minute}, Backoff{time.Minute, time.Minute, 40}},
		{Backoff{time.Second, 5 * time.Second, 3}, Backoff{time.Second, 5 * time.Second, 3}},
	} {
		if got := tc.in.withDefaults(); got != tc.want {
			t.Errorf("%+v.withDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
