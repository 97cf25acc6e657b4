package dex

import (
	"testing"
	"time"
)

// The worker heartbeats every Welcome interval, and at least three times
// per heartbeat timeout of the tasks it runs, never more often than every
// 10 ms.
//
// Covers: E38
func TestWorker_BeatPeriod(t *testing.T) {
	w := &Worker{running: map[string]*taskBeat{}}
	if p := w.beatPeriod(10 * time.Second); p != 10*time.Second {
		t.Fatalf("idle period %v", p)
	}
	w.running["a"] = &taskBeat{}
	w.running["b"] = &taskBeat{timeout: 3 * time.Second}
	w.running["c"] = &taskBeat{timeout: 9 * time.Second}
	if p := w.beatPeriod(10 * time.Second); p != time.Second {
		t.Fatalf("period %v, want a third of the shortest timeout (1s)", p)
	}
	w.running["d"] = &taskBeat{timeout: time.Millisecond}
	if p := w.beatPeriod(10 * time.Second); p != minBeat {
		t.Fatalf("period %v, want the floor %v", p, minBeat)
	}
}

// Details go out once, the latest only.
//
// Covers: E38
func TestTaskBeat_SendsLatestDetailsOnce(t *testing.T) {
	b := &taskBeat{}
	if b.take() != nil {
		t.Fatal("details before any")
	}
	v1, _ := encodeAny(1)
	v2, _ := encodeAny(2)
	b.set(v1)
	b.set(v2)
	if got := b.take(); got != v2 {
		t.Fatalf("took %v, want the latest", got)
	}
	if b.take() != nil {
		t.Fatal("details sent twice")
	}
}
