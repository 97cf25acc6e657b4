package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
)

// Covers: L12
func TestRelease_WritesReleasedWithTheSameEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		h := mustAcquire(t, config(s, "a", 0))
		done := run(t.Context(), h, c)
		c.sleepUntil(4 * time.Second)
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil || r.at != 4*time.Second {
			t.Fatalf("Run returned %v at %v, want nil at the release", r.err, r.at)
		}
		rec := mustRead(t, s)
		if !rec.Released || rec.Epoch != 1 || rec.Holder != "a" || rec.Write != 3 || !rec.RenewedAt.Equal(c.at(4*time.Second)) {
			t.Fatalf("stored %+v, want released by a at epoch 1", rec)
		}
		if h.Valid() || !h.Record().Released {
			t.Fatalf("valid %t, record %+v after Release", h.Valid(), h.Record())
		}
		if err := h.Check(t.Context()); !errors.Is(err, lease.ErrNotValid) {
			t.Fatalf("Check after Release: %v", err)
		}
		if err := h.Release(t.Context()); err != nil || len(s.ops(blob.OpPutIfMatch)) != 2 {
			t.Fatalf("second Release: %v after %d writes, want nil and no write", err, len(s.ops(blob.OpPutIfMatch)))
		}
		if err := h.Run(t.Context()); err == nil {
			t.Fatal("second Run accepted")
		}
	})
}

// Covers: L12
func TestRelease_WaitsForTheRenewalInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		h := mustAcquire(t, config(s, "a", 0))
		faultOn(s.Store, c, blob.OpPutIfMatch, func(n int, _ time.Duration) mem.Fault {
			if n == 1 {
				return mem.Fault{Latency: time.Second}
			}
			return mem.Fault{}
		})
		done := run(t.Context(), h, c)
		c.sleepUntil(3500 * time.Millisecond)
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if c.now() != third10+time.Second {
			t.Fatalf("released at %v, want when the renewal in flight ended", c.now())
		}
		if r := <-done; r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
		if rec := mustRead(t, s); !rec.Released || rec.Write != 3 {
			t.Fatalf("stored %+v", rec)
		}
	})
}

// Covers: L12, L8
func TestRelease_AdoptsALateRenewalThenReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		h := mustAcquire(t, config(s, "a", 0))
		faultOn(s.Store, c, blob.OpPutIfMatch, func(n int, _ time.Duration) mem.Fault {
			if n == 1 {
				return mem.Fault{Latency: 1500 * time.Millisecond, Lands: true}
			}
			return mem.Fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := run(ctx, h, c)
		c.sleepUntil(4 * time.Second) // the renewal is in flight: stop Run
		cancel()
		<-done
		c.sleepUntil(6 * time.Second) // it has landed
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if rec := mustRead(t, s); !rec.Released || rec.Epoch != 1 || rec.Write != 4 {
			t.Fatalf("stored %+v, want released over the late renewal", rec)
		}
	})
}

// Covers: L9, L12
func TestRelease_AfterLossLeavesTheNewHolderAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		a := mustAcquire(t, config(s, "a", 0))
		cfg := config(s, "b", 0)
		cfg.TakeOverHeld = true
		b := mustAcquire(t, cfg)
		if err := a.Check(t.Context()); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("a.Check: %v, want ErrLost", err)
		}
		if err := b.Check(t.Context()); err != nil {
			t.Fatalf("b.Check: %v", err)
		}
		err := a.Release(t.Context())
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("a.Release: %v, want ErrLost", err)
		}
		if rec := mustRead(t, s); rec.Released || rec.Holder != "b" || rec.Epoch != 2 {
			t.Fatalf("stored %+v", rec)
		}
	})
}

// Covers: L9, P2
func TestHolder_CheckConfirmsHolderAndEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		h := mustAcquire(t, config(s, "a", 0))
		if err := h.Check(t.Context()); err != nil {
			t.Fatalf("Check while held: %v", err)
		}
		faultOn(s, newClock(), blob.OpGet, func(int, time.Duration) mem.Fault { return mem.Fault{Err: mem.ErrServer} })
		if err := h.Check(t.Context()); !errors.Is(err, blob.ErrTransient) {
			t.Fatalf("Check with the store failing: %v, want the transient error", err)
		}
		s.SetFaults(nil)
		// A lease whose holder matches but epoch does not is not ours.
		rec, v, _ := lease.Read(t.Context(), s, testKey)
		if _, err := lease.TryAcquire(t.Context(), config(s, "a", 0), rec, v); err != nil {
			t.Fatal(err)
		}
		err := h.Check(t.Context())
		if stop := errorsAsStop(t, err); !errors.Is(err, lease.ErrLost) || stop.Found.Epoch != 2 {
			t.Fatalf("Check after a new epoch: %v", err)
		}
	})
}

// A release on a store that fails every write gives up once the lease has
// run out for every reader too (its validity plus the standbys' margin):
// it used to retry until its caller's deadline, holding a stopping process
// for 10 s on a dead store (found by the chaos runs' review).
//
// Covers: L12
func TestRelease_GivesUpOnceTheLeaseRanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		h := mustAcquire(t, config(s, "a", 3*time.Second))
		faultOn(s.Store, c, blob.OpPutIfMatch, func(int, time.Duration) mem.Fault { return mem.Fault{Err: mem.ErrServer} })
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := h.Release(ctx); err == nil {
			t.Fatal("Release on a dead store succeeded")
		}
		if at, bound := c.now(), h.ValidUntil().Add(lease.ExpiryMargin).Sub(c.at(0)); at > bound {
			t.Fatalf("Release gave up at %v, after the lease ran out for everyone at %v", at, bound)
		}
	})
}
