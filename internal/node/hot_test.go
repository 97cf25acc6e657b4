package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/wal"
	"github.com/dexzd/dexzd/internal/wal/waltest"
)

const (
	hotPoll   = 250 * time.Millisecond
	hotBehind = 10 * time.Second
	hotLag    = 1500 * time.Millisecond
)

// appendFences writes n fence batches to the log, one epoch each after
// *epoch, as a sequence of takeovers would.
func appendFences(t *testing.T, blobs blob.Store, layout wal.Layout, epoch *uint64, n int) {
	t.Helper()
	var next uint64
	for range n {
		*epoch++
		var err error
		next, err = wal.Fence(t.Context(), blobs, layout, *epoch, next, func(wal.Batch) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
}

func newTestHot(blobs blob.Store, layout wal.Layout) (*hotStandby, *flowstore.MemStore) {
	store := flowstore.NewMemStore()
	return newHotStandby(store, blobs, layout, hotPoll, hotBehind, slog.New(slog.DiscardHandler)), store
}

func wantState(t *testing.T, h *hotStandby, want metrics.StandbyState) {
	t.Helper()
	if st, lag := h.State(); st != want {
		t.Fatalf("state = %s (lag %v), want %s", st, lag, want)
	}
}

// A hot standby applies every batch of the log to its local store, then
// polls for the next one with one GET per heldLeasePollInterval (no List),
// and applies batches as they appear. Its lag stays below a poll interval
// while it keeps up; while it trails the log by more than
// behindLagThreshold it is behind, and following again once caught up.
//
// Covers: S3, G8, S10
func TestHotStandby_FollowsTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs, layout := mem.New(), wal.MustLayout("", "n1")
		var epoch uint64
		appendFences(t, blobs, layout, &epoch, 3)
		h, store := newTestHot(blobs, layout)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); h.follow(ctx) }()
		defer func() { cancel(); <-done }()

		synctest.Wait()
		if seq, ok := store.Applied(); !ok || seq != 2 || h.Applied() != 3 {
			t.Fatalf("applied %d, %v (%d batches), want 2 (3)", seq, ok, h.Applied())
		}
		wantState(t, h, metrics.StandbyFollowing)
		if !h.Hot() {
			t.Fatal("not hot while following")
		}

		gets, lists := blobs.Count(blob.OpGet), blobs.Count(blob.OpList)
		time.Sleep(10*hotPoll - time.Millisecond)
		synctest.Wait()
		if n := blobs.Count(blob.OpGet) - gets; n != 9 {
			t.Fatalf("%d GETs in 9 idle polls, want 9", n)
		}
		if blobs.Count(blob.OpList) != lists {
			t.Fatal("the follower listed the log")
		}
		if _, lag := h.State(); lag >= hotPoll {
			t.Fatalf("lag %v while idle, want below a poll interval", lag)
		}

		appendFences(t, blobs, layout, &epoch, 1)
		time.Sleep(hotPoll)
		synctest.Wait()
		if seq, _ := store.Applied(); seq != 3 {
			t.Fatalf("applied %d after a new batch, want 3", seq)
		}

		// 60 batches, each GET taking 200 ms: 12 s to catch up.
		appendFences(t, blobs, layout, &epoch, 60)
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpGet && strings.Contains(key, "/log/") {
				return mem.Fault{Latency: 200 * time.Millisecond}
			}
			return mem.Fault{}
		})
		time.Sleep(hotBehind + time.Second)
		wantState(t, h, metrics.StandbyBehind)
		if h.Hot() {
			t.Fatal("hot while behind")
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		wantState(t, h, metrics.StandbyFollowing)
		if seq, _ := store.Applied(); seq != 63 {
			t.Fatalf("applied %d after catching up, want 63", seq)
		}
	})
}

// An error while following makes the standby restarting (not hot) for a
// backoff of 1 s, after which it follows again from its local store's
// position.
//
// Covers: S10
func TestHotStandby_RestartsAfterAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs, layout := mem.New(), wal.MustLayout("", "n1")
		var epoch uint64
		appendFences(t, blobs, layout, &epoch, 2)
		h, store := newTestHot(blobs, layout)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); h.follow(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()

		appendFences(t, blobs, layout, &epoch, 1)
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpGet && strings.Contains(key, "/log/") {
				return mem.Fault{Err: blob.Permanent(op, key, mem.ErrDenied)}
			}
			return mem.Fault{}
		})
		time.Sleep(hotPoll)
		synctest.Wait()
		wantState(t, h, metrics.StandbyRestarting)
		if h.Hot() {
			t.Fatal("hot while restarting")
		}
		blobs.SetFaults(nil)
		time.Sleep(time.Second)
		synctest.Wait()
		wantState(t, h, metrics.StandbyFollowing)
		if seq, _ := store.Applied(); seq != 2 {
			t.Fatalf("applied %d after the restart, want 2", seq)
		}
	})
}

// A standby whose next batch was truncated away and whose local store
// cannot be restored from a snapshot (no bootstrapper: the in-memory store
// of tests) is failed and stops following. Restoring is tested with real
// stores in test/ha (TestStandby_BootstrapsFromTheNewestSnapshot).
//
// Covers: S10
func TestHotStandby_FailsWhenTheLogWasTruncated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs, layout := mem.New(), wal.MustLayout("", "n1")
		// Records batches, not fences: truncation keeps fences (wal doc,
		// timeline (d)), and a follower may read through kept ones.
		for seq := range uint64(4) {
			blobs.SetRaw(layout.LogKey(seq), wal.Encode(wal.Batch{Seq: seq, Epoch: 1, Kind: wal.KindRecords}))
		}
		ok := func(context.Context) error { return nil }
		if err := waltest.WriteSnapshot(t.Context(), blobs, layout, 3, []byte("x"), ok, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := wal.Truncate(t.Context(), blobs, layout, ok); err != nil {
			t.Fatal(err)
		}
		h, store := newTestHot(blobs, layout)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); h.follow(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		wantState(t, h, metrics.StandbyFailed)
		if _, ok := store.Applied(); ok {
			t.Fatal("a failed standby applied batches")
		}
	})
}

// holdLease acquires the lease for another process and never renews it.
func holdLease(t *testing.T, blobs blob.Store, layout wal.Layout, d time.Duration) *lease.Holder {
	t.Helper()
	h, err := lease.Acquire(t.Context(), lease.Config{Store: blobs, Key: layout.LeaseKey(), NodeID: "n1",
		ProcessID: "other", Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func standbyLeaseConfig(blobs blob.Store, layout wal.Layout, d time.Duration) lease.Config {
	return lease.Config{Store: blobs, Key: layout.LeaseKey(), NodeID: "n1", ProcessID: "standby",
		Duration: d, PollInterval: hotPoll}
}

type acquired struct {
	h   *lease.Holder
	at  time.Time
	err error
}

func startAcquire(t *testing.T, h *hotStandby, cfg lease.Config) <-chan acquired {
	t.Helper()
	out := make(chan acquired, 1)
	go func() {
		hl, err := h.acquire(t.Context(), cfg, hotLag)
		out <- acquired{hl, time.Now(), err}
	}()
	return out
}

// A hot standby takes a released lease within a poll interval plus its
// 0-50 ms jitter; one that is not hot (here restarting) waits
// laggingTakeoverDelay first. After a crash (no release) the hot standby
// takes the lease at its expiry plus 1 s, not before. The new epoch is the
// old one plus one.
//
// Covers: S7, S8, L13
func TestHotStandby_TakesTheLease(t *testing.T) {
	const d = 3 * time.Second
	for _, tc := range []struct {
		name     string
		release  bool
		state    metrics.StandbyState
		min, max time.Duration
	}{
		{"released, hot", true, metrics.StandbyFollowing, 0, hotPoll + hotJitter},
		{"released, restarting", true, metrics.StandbyRestarting, hotLag, hotLag + hotPoll},
		{"expired, hot", false, metrics.StandbyFollowing, d + time.Second, d + time.Second + hotJitter},
		{"expired, behind", false, metrics.StandbyFollowing, d + time.Second + hotLag, d + time.Second + hotLag + time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				blobs, layout := mem.New(), wal.MustLayout("", "n1")
				start := time.Now()
				other := holdLease(t, blobs, layout, d)
				h, _ := newTestHot(blobs, layout)
				h.setBase(tc.state)
				if strings.HasSuffix(tc.name, "behind") {
					h.behind = time.Second // never caught up: behind after 1 s
				}
				got := startAcquire(t, h, standbyLeaseConfig(blobs, layout, d))
				time.Sleep(time.Second)
				synctest.Wait()
				select {
				case a := <-got:
					t.Fatalf("took a held lease: %+v", a)
				default:
				}
				from := start
				if tc.release {
					if err := other.Release(t.Context()); err != nil {
						t.Fatal(err)
					}
					from = time.Now()
				}
				a := <-got
				if a.err != nil {
					t.Fatal(a.err)
				}
				if took := a.at.Sub(from); took < tc.min || took > tc.max {
					t.Fatalf("took the lease %v after the %s, want within [%v, %v]", took,
						map[bool]string{true: "release", false: "last renewal"}[tc.release], tc.min, tc.max)
				}
				if a.h.Epoch() != 2 {
					t.Fatalf("epoch %d, want 2", a.h.Epoch())
				}
			})
		})
	}
}

// A takeover write that fails before the lease is held is retried after a
// backoff (1 s, then 2 s), and the standby keeps following meanwhile.
//
// Covers: S9
func TestHotStandby_RetriesAFailedTakeoverAfterABackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 3 * time.Second
		blobs, layout := mem.New(), wal.MustLayout("", "n1")
		var epoch uint64
		appendFences(t, blobs, layout, &epoch, 1)
		other := holdLease(t, blobs, layout, d)
		h, store := newTestHot(blobs, layout)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); h.follow(ctx) }()
		defer func() { cancel(); <-done }()
		if err := other.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		failures := 2
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfMatch && key == layout.LeaseKey() && failures > 0 {
				failures--
				return mem.Fault{Err: mem.ErrDenied}
			}
			return mem.Fault{}
		})
		released := time.Now()
		got := startAcquire(t, h, standbyLeaseConfig(blobs, layout, d))
		time.Sleep(2 * time.Second)
		appendFences(t, blobs, layout, &epoch, 1)
		a := <-got
		if a.err != nil {
			t.Fatal(a.err)
		}
		if took := a.at.Sub(released); took < 3*time.Second || took > 3*time.Second+3*hotJitter {
			t.Fatalf("took the lease %v after the release, want after backoffs of 1 s and 2 s", took)
		}
		cancel()
		<-done
		if seq, _ := store.Applied(); seq != 1 {
			t.Fatalf("applied %d while retrying, want 1 (kept following)", seq)
		}
	})
}
