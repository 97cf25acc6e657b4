package node

import "testing"

// When the active writes a snapshot: never when disabled; after
// everyBatches at the latest; else, past the minimum batch count, once the
// log since the last snapshot holds half its size (or at once when there
// was none in this period).
func TestSnapshotDue(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	cases := []struct {
		every                       int
		batches, logBytes, lastSize uint64
		want                        bool
	}{
		{0, 1 << 30, 1 << 40, 0, false},             // disabled
		{10000, 10000, 0, 1 << 40, true},            // the bound on replay
		{10000, 999, 100 * mib, 1 * mib, false},     // below the minimum batch count
		{10000, 1000, 0, 0, true},                   // the first snapshot of the period
		{10000, 1000, mib / 2, 1 * mib, true},       // the tail is half the snapshot
		{10000, 5000, mib/2 - 1, 1 * mib, false},    // not yet
		{10000, 9999, 100 * mib, 1000 * mib, false}, // a large store: wait for the bound
		{4, 4, 0, 0, true},                          // a small everyBatches is its own minimum
		{4, 3, 1 << 40, 1, false},
	}
	for _, c := range cases {
		if got := snapshotDue(c.every, c.batches, c.logBytes, c.lastSize); got != c.want {
			t.Errorf("snapshotDue(%d, %d, %d, %d) = %v, want %v", c.every, c.batches, c.logBytes, c.lastSize, got, c.want)
		}
	}
}
