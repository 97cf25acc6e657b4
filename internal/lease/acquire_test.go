package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
)

// Covers: L3
func TestAcquire_EveryAcquisitionRaisesEpochByOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		a := mustAcquire(t, config(s, "a", 0)) // absent: create-if-absent
		if a.Epoch() != 1 || s.Count(blob.OpPutIfAbsent) != 1 {
			t.Fatalf("first acquisition: epoch %d, %d create-if-absent writes", a.Epoch(), s.Count(blob.OpPutIfAbsent))
		}
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		b := mustAcquire(t, config(s, "b", 0)) // released
		if b.Epoch() != 2 {
			t.Fatalf("after release: epoch %d, want 2", b.Epoch())
		}
		// b stops without releasing; c waits for the expiry.
		cc := mustAcquire(t, config(s, "c", 0))
		if cc.Epoch() != 3 || c.now() != 11*time.Second {
			t.Fatalf("after expiry: epoch %d at %v, want 3 at 11s", cc.Epoch(), c.now())
		}
		d := config(s, "d", 0)
		d.TakeOverHeld = true
		dh := mustAcquire(t, d) // held: taken over
		if dh.Epoch() != 4 {
			t.Fatalf("after takeover: epoch %d, want 4", dh.Epoch())
		}
		// A lease left by this very process ID is taken at once too.
		again := mustAcquire(t, config(s, "d", 0))
		if again.Epoch() != 5 || c.now() != 11*time.Second {
			t.Fatalf("lease left by the same process: epoch %d at %v, want 5 at 11s", again.Epoch(), c.now())
		}
		if rec := mustRead(t, s); rec.Epoch != 5 || rec.Holder != "d" {
			t.Fatalf("stored lease %+v, want epoch 5 held by d", rec)
		}
	})
}

// Covers: L3
func TestAcquire_RacingAcquirersExactlyOneWins(t *testing.T) {
	for _, start := range []string{"absent", "released", "expired"} {
		t.Run(start, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				var prev uint64
				switch start {
				case "released":
					h := mustAcquire(t, config(s, "old", 0))
					if err := h.Release(t.Context()); err != nil {
						t.Fatal(err)
					}
					prev = 1
				case "expired":
					mustAcquire(t, config(s, "old", 0))
					time.Sleep(11 * time.Second)
					prev = 1
				}
				// Both read the lease before either writes.
				var arrived sync.WaitGroup
				arrived.Add(2)
				barrier := func(context.Context) error { arrived.Done(); arrived.Wait(); return nil }
				holders := make([]*lease.Holder, 2)
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i := range 2 {
					wg.Go(func() {
						cfg := config(s, fmt.Sprintf("racer-%d", i), 0)
						cfg.FailIfHeld = true
						cfg.BeforeWrite = barrier
						holders[i], errs[i] = lease.Acquire(t.Context(), cfg)
					})
				}
				wg.Wait()
				var winners int
				for i := range 2 {
					if errs[i] == nil {
						winners++
						if holders[i].Epoch() != prev+1 {
							t.Errorf("winner epoch %d, want %d", holders[i].Epoch(), prev+1)
						}
						continue
					}
					var held *lease.HeldError
					if !errors.As(errs[i], &held) || held.Holder != fmt.Sprintf("racer-%d", 1-i) {
						t.Errorf("loser got %v, want a HeldError naming racer-%d", errs[i], 1-i)
					}
				}
				if winners != 1 {
					t.Fatalf("%d winners, want exactly 1 (errors %v)", winners, errs)
				}
				if rec := mustRead(t, s); rec.Epoch != prev+1 {
					t.Fatalf("stored epoch %d, want %d", rec.Epoch, prev+1)
				}
			})
		})
	}
}

// Covers: L3
func TestTryAcquire_SameObservedVersionOneWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		h := mustAcquire(t, config(s, "old", 0))
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		rec, v, err := lease.Read(t.Context(), s, testKey)
		if err != nil || !rec.AvailableAt(time.Now()) {
			t.Fatalf("read released lease: %+v, %v", rec, err)
		}
		first, err1 := lease.TryAcquire(t.Context(), config(s, "hot-1", 0), rec, v)
		_, err2 := lease.TryAcquire(t.Context(), config(s, "hot-2", 0), rec, v)
		if err1 != nil || first.Epoch() != 2 {
			t.Fatalf("first TryAcquire: %v", err1)
		}
		if !errors.Is(err2, blob.ErrPrecondition) {
			t.Fatalf("second TryAcquire on the same version: %v, want a precondition failure", err2)
		}
	})
}

// Covers: L3
func TestTryAcquire_ReplyLostButWriteLanded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		faultOn(s, c, blob.OpPutIfAbsent, func(int, time.Duration) mem.Fault {
			return mem.Fault{Err: mem.ErrServer, Lands: true}
		})
		h, err := lease.TryAcquire(t.Context(), config(s, "a", 0), lease.Record{}, "")
		if err != nil {
			t.Fatalf("TryAcquire whose write landed: %v", err)
		}
		if h.Epoch() != 1 || s.Count(blob.OpGet) != 1 {
			t.Fatalf("epoch %d after %d reads, want epoch 1 after one read-back", h.Epoch(), s.Count(blob.OpGet))
		}
		// The holder knows the version: its renewal succeeds.
		ctx, cancel := context.WithCancel(t.Context())
		done := run(ctx, h, c)
		time.Sleep(4 * time.Second)
		cancel()
		if r := <-done; r.err != nil || mustRead(t, s).Write != 2 {
			t.Fatalf("Run: %v; stored %+v", r.err, mustRead(t, s))
		}
	})
}

// Covers: L12
func TestRelease_WaitingAcquirerTakesOverAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		a := mustAcquire(t, config(s, "a", 0))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		aDone := run(ctx, a, c)

		type acquired struct {
			h  *lease.Holder
			at time.Duration
		}
		bDone := make(chan acquired, 1)
		go func() {
			time.Sleep(1100 * time.Millisecond)
			cfg := config(s, "b", 0)
			cfg.PollInterval = 250 * time.Millisecond
			h, err := lease.Acquire(t.Context(), cfg)
			if err != nil {
				t.Errorf("b: %v", err)
			}
			bDone <- acquired{h, c.now()}
		}()

		c.sleepUntil(5 * time.Second)
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if a.Valid() {
			t.Error("Valid() after Release")
		}
		if r := <-aDone; r.err != nil || r.at != 5*time.Second {
			t.Errorf("a's Run returned %v at %v, want nil at 5s", r.err, r.at)
		}
		b := <-bDone
		// b polls every 250 ms from 1.1 s: the first poll after the
		// release is at 5.1 s, long before a's lease would expire.
		if b.at != 5100*time.Millisecond || b.h.Epoch() != 2 {
			t.Fatalf("b acquired epoch %d at %v, want epoch 2 at 5.1s", b.h.Epoch(), b.at)
		}
		if err := a.Release(t.Context()); err != nil {
			t.Fatalf("second Release: %v", err)
		}
	})
}

// Covers: L13
func TestAcquire_AfterCrashWaitsUntilRenewalPlusDurationPlusOneSecond(t *testing.T) {
	for _, tc := range []struct {
		d, poll time.Duration
	}{
		{10 * time.Second, 0}, // default poll interval, 1 s
		{10 * time.Second, 250 * time.Millisecond},
		{60 * time.Second, 0},
		{3 * time.Second, 700 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v/poll=%v", tc.d, tc.poll), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRecorder()
				c := s.clock
				a := mustAcquire(t, config(s, "a", tc.d))
				ctx, crash := context.WithCancel(t.Context())
				aDone := run(ctx, a, c)
				// a renews at d/3, then "crashes" at d/2 without releasing.
				c.sleepUntil(tc.d / 2)
				crash()
				<-aDone
				lastRenewal := tc.d / 3
				if rec := mustRead(t, s); !rec.RenewedAt.Equal(c.at(lastRenewal)) {
					t.Fatalf("last renewal at %v, want %v", rec.RenewedAt.Sub(c.t0), lastRenewal)
				}

				cfg := config(s, "b", tc.d)
				cfg.PollInterval = tc.poll
				b, err := lease.Acquire(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				want := lastRenewal + tc.d + time.Second
				if got := c.now(); got != want {
					t.Fatalf("b acquired at %v, want exactly %v (last renewal + duration + 1s)", got, want)
				}
				if b.Epoch() != 2 {
					t.Fatalf("b epoch %d, want 2", b.Epoch())
				}
				// b wrote nothing before the expiry.
				writes := s.ops(blob.OpPutIfMatch)
				if last := writes[len(writes)-1]; last.start != want || len(writes) != 2 {
					t.Fatalf("writes %+v: want a's renewal and b's single acquisition at %v", writes, want)
				}
			})
		})
	}
}

// Covers: L14
func TestAcquire_FailIfHeldNamesTheHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		time.Sleep(2 * time.Second)
		mustAcquire(t, config(s, "host-a/17/cafe", 0))
		time.Sleep(time.Second)
		cfg := config(s, "host-b/18/f00d", 0)
		cfg.FailIfHeld = true
		_, err := lease.Acquire(t.Context(), cfg)
		var held *lease.HeldError
		if !errors.As(err, &held) || !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("got %v, want a *HeldError", err)
		}
		if held.Holder != "host-a/17/cafe" || held.Epoch != 1 || !held.RenewedAt.Equal(c.at(2*time.Second)) ||
			!held.ExpiresAt.Equal(c.at(13*time.Second)) || held.Key != testKey {
			t.Fatalf("HeldError %+v", held)
		}
		for _, part := range []string{"host-a/17/cafe", "epoch 1", "2000-01-01T00:00:02Z", testKey} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("message %q does not name %q", err, part)
			}
		}
		if c.now() != 3*time.Second || s.Count(blob.OpPutIfMatch)+s.Count(blob.OpPutIfAbsent) != 1 {
			t.Fatalf("returned at %v after %d writes, want at once with no write", c.now(),
				s.Count(blob.OpPutIfMatch)+s.Count(blob.OpPutIfAbsent)-1)
		}
		// A released lease is not held: FailIfHeld acquires it.
		time.Sleep(20 * time.Second)
		if h, err := lease.Acquire(t.Context(), cfg); err != nil || h.Epoch() != 2 {
			t.Fatalf("FailIfHeld on an expired lease: %v", err)
		}
	})
}

// Covers: D3
func TestAcquire_TakeOverHeldTakesLiveLeaseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		a := mustAcquire(t, config(s, "a", 30*time.Second))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		aDone := run(ctx, a, c)

		time.Sleep(2 * time.Second)
		cfg := config(s, "dev-restart", 30*time.Second)
		cfg.TakeOverHeld = true
		cfg.FailIfHeld = true // takeover wins: the held lease is a stopped process's
		b := mustAcquire(t, cfg)
		if c.now() != 2*time.Second || b.Epoch() != 2 {
			t.Fatalf("took over epoch %d at %v, want epoch 2 at once (2s)", b.Epoch(), c.now())
		}
		if rec := mustRead(t, s); rec.Holder != "dev-restart" || rec.Epoch != 2 {
			t.Fatalf("stored %+v", rec)
		}
		// The old holder, if it were still alive, finds out at its renewal.
		r := <-aDone
		if !errors.Is(r.err, lease.ErrLost) || r.at != 10*time.Second {
			t.Fatalf("old holder: %v at %v, want ErrLost at 10s", r.err, r.at)
		}
	})
}

// Covers: L9
func TestAcquire_StoreErrors(t *testing.T) {
	t.Run("permanent stops at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			c := newClock()
			faultOn(s, c, blob.OpGet, func(int, time.Duration) mem.Fault {
				return mem.Fault{Err: blob.Permanent(blob.OpGet, testKey, mem.ErrDenied)}
			})
			_, err := lease.Acquire(t.Context(), config(s, "a", 0))
			if !errors.Is(err, blob.ErrPermanent) || !errors.Is(err, mem.ErrDenied) || c.now() != 0 {
				t.Fatalf("got %v at %v, want the permanent error at once", err, c.now())
			}
		})
	})
	t.Run("transient is retried after a backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			c := newClock()
			faultOn(s, c, blob.OpGet, func(n int, _ time.Duration) mem.Fault {
				if n <= 3 {
					return mem.Fault{Err: mem.ErrThrottled}
				}
				return mem.Fault{}
			})
			h := mustAcquire(t, config(s, "a", 0))
			if h.Epoch() != 1 || c.now() != 700*time.Millisecond {
				t.Fatalf("acquired epoch %d at %v, want 1 at 0.1+0.2+0.4s", h.Epoch(), c.now())
			}
		})
	})
	t.Run("lease of another node", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			other := config(s, "a", 0)
			other.NodeID = "n2"
			mustAcquire(t, other)
			_, err := lease.Acquire(t.Context(), config(s, "b", 0))
			if !errors.Is(err, blob.ErrPermanent) || !strings.Contains(err.Error(), `"n2"`) {
				t.Fatalf("got %v, want a permanent error naming node n2", err)
			}
		})
	})
	t.Run("context ends while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			mustAcquire(t, config(s, "a", 0))
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			_, err := lease.Acquire(ctx, config(s, "b", 0))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the context's error", err)
			}
		})
	})
}

// Covers: L3
func TestAcquire_BeforeWriteRunsBeforeTheWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		h := mustAcquire(t, config(s, "old", 0))
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A lagging standby delays 1.5 s, a hot one 30 ms: the conditional
		// write decides, and the quicker one wins.
		delay := func(d time.Duration) func(context.Context) error {
			return func(context.Context) error { time.Sleep(d); return nil }
		}
		var wg sync.WaitGroup
		got := map[string]error{}
		var mu sync.Mutex
		for pid, d := range map[string]time.Duration{"lagging": 1500 * time.Millisecond, "hot": 30 * time.Millisecond} {
			wg.Go(func() {
				cfg := config(s, pid, 0)
				cfg.FailIfHeld = true
				cfg.BeforeWrite = delay(d)
				_, err := lease.Acquire(t.Context(), cfg)
				mu.Lock()
				got[pid] = err
				mu.Unlock()
			})
		}
		wg.Wait()
		if got["hot"] != nil || !errors.Is(got["lagging"], lease.ErrHeld) {
			t.Fatalf("results %v: want hot to win and lagging to find the lease held", got)
		}
		if rec := mustRead(t, s); rec.Holder != "hot" || !rec.RenewedAt.Equal(c.at(30*time.Millisecond)) {
			t.Fatalf("stored %+v", rec)
		}
		// An error from the hook is returned and nothing is written.
		hookErr := errors.New("shutting down")
		cfg := config(s, "x", 0)
		cfg.TakeOverHeld = true
		cfg.BeforeWrite = func(context.Context) error { return hookErr }
		if _, err := lease.Acquire(t.Context(), cfg); !errors.Is(err, hookErr) {
			t.Fatalf("got %v, want the hook's error", err)
		}
	})
}
