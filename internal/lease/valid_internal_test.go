package lease

import (
	"testing"
	"time"
)

// A host suspend stops the monotonic clock but not the wall clock: a
// process resumed after a suspend longer than its lease must not count
// its lease as valid (before, it did until its next renewal failed, and
// served meanwhile). Clock steps of the wall clock must not extend it.
//
// Covers: L15, P2
func TestValidAt_BothClocksMustBeWithinTheLease(t *testing.T) {
	t.Parallel()
	const d = 10 * time.Second
	sent := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		monoAfter time.Duration // of the monotonic clock since the write
		wallAfter time.Duration // of the wall clock since the write
		want      bool
	}{
		{"just renewed", time.Second, time.Second, true},
		{"expired on both", 11 * time.Second, 11 * time.Second, false},
		{"host suspended for an hour", time.Second, time.Hour, false},
		{"host suspended past the end by 1 ms", time.Second, d, false},
		{"wall clock stepped back an hour", 11 * time.Second, -time.Hour, false},
		{"wall clock stepped back, within the lease", time.Second, -time.Hour, true},
	} {
		if got := validAt(sent, sent, sent.Add(c.monoAfter), sent.Add(c.wallAfter), d); got != c.want {
			t.Errorf("%s: valid = %v, want %v", c.name, got, c.want)
		}
	}
}
