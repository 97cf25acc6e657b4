package lease_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
)

// errTakenOver is the Stop of holdOffLike's first rule.
var errTakenOver = errors.New("another process holds the lease")

// holdOffLike is a Config.Decide with a step-down hold-off's rules: a
// lease another process holds stops the wait; before until, every
// observation waits 250 ms (or until until) and reads again; from until
// on, a read is left to Acquire and any error stops it. Every
// observation is recorded in seen.
func holdOffLike(until time.Time, mu *sync.Mutex, seen *[]lease.Observation) func(lease.Observation) lease.Decision {
	return func(o lease.Observation) lease.Decision {
		mu.Lock()
		*seen = append(*seen, o)
		mu.Unlock()
		switch {
		case o.Held:
			return lease.Decision{Stop: errTakenOver}
		case !o.At.Before(until) && o.Err != nil:
			return lease.Decision{Stop: o.Err}
		case !o.At.Before(until):
			return lease.Decision{}
		}
		return lease.Decision{Wait: min(250*time.Millisecond, until.Sub(o.At))}
	}
}

// writes counts the acquisition and release writes s has seen.
func writes(s *recorder) int { return len(s.ops(blob.OpPutIfAbsent)) + len(s.ops(blob.OpPutIfMatch)) }

// Covers: A7
func TestAcquire_DecideStopsOnceAnotherProcessHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		a := mustAcquire(t, config(s, "a", 0))
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		// a holds off for 5 s; b acquires the released lease at 1.1 s.
		var mu sync.Mutex
		var seen []lease.Observation
		type res struct {
			h   *lease.Holder
			err error
			at  time.Duration
		}
		done := make(chan res, 1)
		go func() {
			cfg := config(s, "a", 0)
			cfg.Decide = holdOffLike(c.at(5*time.Second), &mu, &seen)
			h, err := lease.Acquire(t.Context(), cfg)
			done <- res{h, err, c.now()}
		}()
		c.sleepUntil(1100 * time.Millisecond)
		b := mustAcquire(t, config(s, "b", 0))
		r := <-done
		// a's first read after b's write, at 1.25 s, ends its wait, and a
		// wrote nothing (a's acquisition and release, b's acquisition).
		if !errors.Is(r.err, errTakenOver) || r.h != nil || r.at != 1250*time.Millisecond || writes(s) != 3 {
			t.Fatalf("a's wait ended with holder %t, error %v at %v after %d writes; want the Stop at 1.25s after 3 writes",
				r.h != nil, r.err, r.at, writes(s))
		}
		last := seen[len(seen)-1]
		if !last.Held || last.Record.Holder != "b" || last.Record.Epoch != b.Epoch() || last.Err != nil ||
			!last.At.Equal(c.at(1250*time.Millisecond)) {
			t.Fatalf("last observation %+v, want b's lease held at 1.25s", last)
		}
		// Every read before it found the released lease, not held.
		if len(seen) != 6 {
			t.Fatalf("%d observations, want reads at 0, 0.25, ..., 1.25s", len(seen))
		}
		for _, o := range seen[:len(seen)-1] {
			if o.Held || !o.Record.Released || o.Record.Holder != "a" {
				t.Fatalf("observation %+v before b's write, want a's released lease", o)
			}
		}
	})
}

// Covers: A5
func TestAcquire_DecideWritesOnlyWhenItLeavesTheReadToAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		a := mustAcquire(t, config(s, "a", 0))
		c.sleepUntil(100 * time.Millisecond)
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var seen []lease.Observation
		cfg := config(s, "a", 0)
		cfg.Decide = holdOffLike(c.at(1200*time.Millisecond), &mu, &seen)
		h := mustAcquire(t, cfg)
		// Reads at 0.1, 0.35, 0.6, 0.85, 1.1 and at the end, 1.2 s; the
		// released lease is taken back then, with the next epoch.
		if c.now() != 1200*time.Millisecond || h.Epoch() != 2 || len(seen) != 6 || writes(s) != 3 {
			t.Fatalf("took epoch %d at %v after %d observations and %d writes, want epoch 2 at 1.2s after 6 and 3",
				h.Epoch(), c.now(), len(seen), writes(s))
		}
		if w := s.ops(blob.OpPutIfMatch); w[len(w)-1].start != 1200*time.Millisecond {
			t.Fatalf("take-back write at %v, want 1.2s", w[len(w)-1].start)
		}
	})
}

// Covers: L9
func TestAcquire_DecideSeesFailedReadsAndWrites(t *testing.T) {
	t.Run("a read error it waits on is read again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			c := newClock()
			faultOn(s, c, blob.OpGet, func(n int, _ time.Duration) mem.Fault {
				if n <= 2 {
					return mem.Fault{Err: blob.Permanent(blob.OpGet, testKey, mem.ErrDenied)}
				}
				return mem.Fault{}
			})
			var mu sync.Mutex
			var seen []lease.Observation
			cfg := config(s, "a", 0)
			cfg.Decide = holdOffLike(c.at(time.Second), &mu, &seen)
			h := mustAcquire(t, cfg) // Acquire alone returns a permanent read error
			if h.Epoch() != 1 || c.now() != time.Second || !errors.Is(seen[0].Err, mem.ErrDenied) || seen[0].Write {
				t.Fatalf("epoch %d at %v, first observation %+v", h.Epoch(), c.now(), seen[0])
			}
		})
	})
	t.Run("a failed write is its to decide", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			c := newClock()
			faultOn(s, c, blob.OpPutIfAbsent, func(int, time.Duration) mem.Fault { return mem.Fault{Err: mem.ErrServer} })
			var mu sync.Mutex
			var seen []lease.Observation
			cfg := config(s, "a", 0)
			cfg.Decide = holdOffLike(c.at(0), &mu, &seen)
			_, err := lease.Acquire(t.Context(), cfg) // Acquire alone retries it
			last := seen[len(seen)-1]
			if !errors.Is(err, mem.ErrServer) || c.now() != 0 || !last.Write || last.Version != "" || !errors.Is(last.Err, mem.ErrServer) {
				t.Fatalf("got %v at %v, last observation %+v; want the write's error at once", err, c.now(), last)
			}
		})
	})
}

func TestAcquire_DecideWakeEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		wake := make(chan struct{})
		var reads []time.Duration
		cfg := config(s, "a", 0)
		cfg.Decide = func(o lease.Observation) lease.Decision {
			reads = append(reads, c.now())
			if len(reads) == 1 {
				return lease.Decision{Wait: time.Hour, Wake: wake}
			}
			return lease.Decision{}
		}
		go func() { time.Sleep(700 * time.Millisecond); close(wake) }()
		h := mustAcquire(t, cfg)
		if h.Epoch() != 1 || len(reads) != 2 || reads[1] != 700*time.Millisecond {
			t.Fatalf("epoch %d after reads at %v, want a second read at 0.7s", h.Epoch(), reads)
		}
	})
}
