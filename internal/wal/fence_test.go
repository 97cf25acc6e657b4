package wal_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
)

// Covers: G2, T1, L4
func TestFence_EmptyLog(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		var a applied
		next, err := wal.Fence(t.Context(), s, layout, 1, 0, a.apply)
		if err != nil || next != 1 {
			t.Fatalf("Fence = %d, %v; want 1, nil", next, err)
		}
		if b := stored(t, s, 0); b.Kind != wal.KindFence || b.Epoch != 1 {
			t.Fatalf("stored %+v, want a fence of epoch 1", b)
		}
		if got := a.get(); len(got) != 1 || got[0].Kind != wal.KindFence {
			t.Fatalf("applied %+v, want the new fence", got)
		}
		// L4: the only log write is a create-if-absent.
		for _, q := range rec.requests() {
			if strings.HasPrefix(q.key, layout.LogPrefix()) && q.op != blob.OpGet && q.op != blob.OpPutIfAbsent {
				t.Errorf("log request %s %s is not a conditional create", q.op, q.key)
			}
		}
	})
}

// Batches written by older epochs before the fence are applied in order,
// then the fence lands at the first free sequence number.
//
// Covers: G2, T1
func TestFence_AppliesOlderEpochBatches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 40, Epoch: 6, Kind: wal.KindFence})
		plant(s, wal.Batch{Seq: 41, Epoch: 6, Kind: wal.KindRecords, Records: recs("a")})
		plant(s, wal.Batch{Seq: 42, Epoch: 7, Kind: wal.KindFence})
		plant(s, wal.Batch{Seq: 43, Epoch: 7, Kind: wal.KindRecords, Records: recs("b", "c")})
		var a applied
		next, err := wal.Fence(t.Context(), s, layout, 8, 41, a.apply)
		if err != nil || next != 45 {
			t.Fatalf("Fence = %d, %v; want 45, nil", next, err)
		}
		if got, want := a.seqs(), []uint64{41, 42, 43, 44}; !slices.Equal(got, want) {
			t.Fatalf("applied %v, want %v", got, want)
		}
		if b := stored(t, s, 44); b.Kind != wal.KindFence || b.Epoch != 8 {
			t.Fatalf("stored %+v at 44, want a fence of epoch 8", b)
		}
	})
}

// Timeline (b) of doc.go: the old holder's batch lands between the new
// holder's miss and its fence write. The fence write loses, the new holder
// applies the old batch (which the old holder acknowledged) and fences at
// the next number; then timeline (a): the old writer's next write finds the
// fence and it stops.
//
// Covers: G2, G3, G4, L4
func TestFence_OldWriterBatchLandsBeforeFence(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 41, Epoch: 7, Kind: wal.KindFence})
		var oldApplied applied
		old, err := wal.NewWriter(wal.WriterConfig{Store: s, Layout: layout, Epoch: 7, NextSeq: 42, OnDurable: oldApplied.apply})
		if err != nil {
			t.Fatal(err)
		}
		old.Start(t.Context())
		defer old.Stop()

		var acked uint64
		hs := &hookStore{Store: s}
		hs.beforePut = func(key string) {
			if key != layout.LogKey(42) {
				return
			}
			hs.beforePut = nil
			// The old holder's write lands and is acknowledged just
			// before the new holder's fence write reaches the store.
			seq, err := old.Submit(t.Context(), []byte("acked by epoch 7"))
			if err != nil || seq != 42 {
				t.Errorf("old Submit = %d, %v", seq, err)
			}
			acked = seq
		}
		var a applied
		next, err := wal.Fence(t.Context(), hs, layout, 8, 42, a.apply)
		if err != nil || next != 44 {
			t.Fatalf("Fence = %d, %v; want 44, nil", next, err)
		}
		got := a.get()
		if len(got) != 2 || got[0].Seq != acked || got[0].Epoch != 7 || string(got[0].Records[0]) != "acked by epoch 7" {
			t.Fatalf("new holder applied %+v, want the acknowledged batch 42 first", got)
		}
		if got[1].Seq != 43 || got[1].Kind != wal.KindFence || got[1].Epoch != 8 {
			t.Fatalf("new holder applied %+v, want its fence at 43", got[1])
		}

		// (a): the old writer's next batch finds the fence and it stops.
		if _, err := old.Submit(t.Context(), []byte("never acked")); !errors.Is(err, wal.ErrFenced) {
			t.Fatalf("old Submit after the fence: %v, want ErrFenced", err)
		}
		<-old.Done()
		if !errors.Is(old.Err(), wal.ErrFenced) {
			t.Fatalf("old Err = %v", old.Err())
		}
		if b := stored(t, s, 43); b.Epoch != 8 {
			t.Fatalf("the old writer overwrote the fence: %+v", b)
		}
		if keys := logKeys(s); len(keys) != 3 {
			t.Fatalf("log holds %v, want 41..43 only", keys)
		}
	})
}

// Timeline (a) of doc.go: the fence is in place first; the old writer's
// create-if-absent loses and it reads a higher epoch.
//
// Covers: G4, L4
func TestFence_OldWriterLosesRace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 41, Epoch: 7, Kind: wal.KindRecords}) // what the local store applied last
		var a applied
		if _, err := wal.Fence(t.Context(), s, layout, 8, 42, a.apply); err != nil {
			t.Fatal(err)
		}
		var oldApplied applied
		old, _ := wal.NewWriter(wal.WriterConfig{Store: s, Layout: layout, Epoch: 7, NextSeq: 42, OnDurable: oldApplied.apply})
		old.Start(t.Context())
		defer old.Stop()
		_, err := old.Submit(t.Context(), []byte("x"))
		if !errors.Is(err, wal.ErrFenced) || !strings.Contains(err.Error(), layout.LogKey(42)) {
			t.Fatalf("got %v, want ErrFenced naming the key", err)
		}
		if len(oldApplied.get()) != 0 {
			t.Fatal("the fenced writer applied a batch")
		}
	})
}

// Covers: G4
func TestFence_HigherEpochFound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 0, Epoch: 9, Kind: wal.KindFence})
		var a applied
		_, err := wal.Fence(t.Context(), s, layout, 8, 0, a.apply)
		if !errors.Is(err, wal.ErrFenced) {
			t.Fatalf("got %v, want ErrFenced", err)
		}
		if len(a.get()) != 0 || len(logKeys(s)) != 1 {
			t.Fatal("a fenced process applied or wrote something")
		}
	})
}

// The fence write lands but its reply is lost; the retry loses, reads the
// key back, finds its own fence and writes no second one.
//
// Covers: G5, G2
func TestFence_ReplyLost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 9, Epoch: 2, Kind: wal.KindRecords}) // what the local store applied last
		rec := record(s)
		lost := true
		rec.setFault(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent && lost {
				lost = false
				return mem.Fault{Err: mem.ErrServer, Lands: true}
			}
			return mem.Fault{}
		})
		var a applied
		next, err := wal.Fence(t.Context(), s, layout, 3, 10, a.apply)
		if err != nil || next != 11 {
			t.Fatalf("Fence = %d, %v; want 11, nil", next, err)
		}
		if got := a.seqs(); !slices.Equal(got, []uint64{10}) {
			t.Fatalf("applied %v, want the fence once", got)
		}
		if keys := logKeys(s); len(keys) != 2 {
			t.Fatalf("log holds %v, want batch 9 and one fence", keys)
		}
		// Fencing again with the same epoch finds the fence and writes none.
		var b applied
		next, err = wal.Fence(t.Context(), s, layout, 3, 10, b.apply)
		if err != nil || next != 11 || len(logKeys(s)) != 2 {
			t.Fatalf("second Fence = %d, %v, keys %v", next, err, logKeys(s))
		}
	})
}

// Transient errors (409 conflicts, 5xx) on reads and on the fence write are
// retried with backoff.
//
// Covers: G5
func TestFence_TransientRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 0, Epoch: 1, Kind: wal.KindFence})
		rec := record(s)
		seen := map[string]bool{}
		rec.setFault(func(op, key string) mem.Fault {
			if !seen[op+key] { // the first request of each kind fails
				seen[op+key] = true
				return mem.Fault{Err: mem.ErrConflict}
			}
			return mem.Fault{}
		})
		var a applied
		start := time.Now()
		next, err := wal.Fence(t.Context(), s, layout, 2, 0, a.apply)
		if err != nil || next != 2 {
			t.Fatalf("Fence = %d, %v", next, err)
		}
		// Four rounds (the reads of batches 0 and 1, read together; the
		// manifest's read and its write recording the fence position;
		// the put of 1), each retried once after the first backoff of
		// 50 ms.
		if d := time.Since(start); d != 4*50*time.Millisecond {
			t.Fatalf("took %v, want 200ms", d)
		}
	})
}

// A process whose local position is below the truncation point must restore
// from a snapshot: Fence refuses and writes nothing.
//
// Covers: G7, T1
func TestFence_Truncated(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		s.SetRaw(layout.ManifestKey(), []byte(`{"version":1,"logStart":10,"snapshots":[10]}`))
		plant(s, wal.Batch{Seq: 10, Epoch: 1, Kind: wal.KindRecords})
		var a applied
		_, err := wal.Fence(t.Context(), s, layout, 2, 5, a.apply)
		if !errors.Is(err, wal.ErrTruncated) {
			t.Fatalf("got %v, want ErrTruncated", err)
		}
		if _, ok := s.Raw(layout.LogKey(5)); ok {
			t.Fatal("a fence was written into the truncated part of the log")
		}
	})
}

// Covers: G1, G2
func TestFence_CorruptionStops(t *testing.T) {
	t.Parallel()
	cases := map[string][]wal.Batch{
		"epoch goes backwards": {
			{Seq: 0, Epoch: 5, Kind: wal.KindFence},
			{Seq: 1, Epoch: 4, Kind: wal.KindRecords},
		},
		"wrong seq inside": {
			{Seq: 0, Epoch: 5, Kind: wal.KindFence},
			{Seq: 7, Epoch: 5, Kind: wal.KindRecords},
		},
	}
	for name, batches := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				for i, b := range batches {
					s.SetRaw(layout.LogKey(uint64(i)), wal.Encode(b))
				}
				var a applied
				_, err := wal.Fence(t.Context(), s, layout, 6, 0, a.apply)
				var ce *wal.CorruptError
				if !errors.As(err, &ce) || ce.Key != layout.LogKey(1) {
					t.Fatalf("got %v, want corruption naming %s", err, layout.LogKey(1))
				}
				if len(logKeys(s)) != 2 {
					t.Fatal("Fence wrote past corruption")
				}
			})
		})
	}
	t.Run("garbage", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			s.SetRaw(layout.LogKey(0), []byte("not a batch at all, sorry"))
			var a applied
			_, err := wal.Fence(t.Context(), s, layout, 6, 0, a.apply)
			if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), layout.LogKey(0)) {
				t.Fatalf("got %v", err)
			}
		})
	})
}

// Covers: L10, G2
func TestFence_StoreDownTimesOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: time.Hour}
			}
			return mem.Fault{}
		})
		var a applied
		start := time.Now()
		_, err := wal.Fence(t.Context(), s, layout, 1, 0, a.apply)
		if !errors.Is(err, wal.ErrLogWriteTimeout) {
			t.Fatalf("got %v, want ErrLogWriteTimeout", err)
		}
		if d := time.Since(start); d != wal.LogWriteLimit {
			t.Fatalf("gave up after %v, want %v", d, wal.LogWriteLimit)
		}
	})
}

// Covers: G2
func TestFence_ApplyErrorStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 0, Epoch: 1, Kind: wal.KindFence})
		boom := errors.New("boom")
		_, err := wal.Fence(context.Background(), s, layout, 2, 0, func(wal.Batch) error { return boom })
		if !errors.Is(err, boom) || len(logKeys(s)) != 1 {
			t.Fatalf("got %v, keys %v", err, logKeys(s))
		}
	})
}

// A replay reads ahead: with 5 ms per request, 200 batches replay in
// about 200/ReplayReadAhead round trips, not 200 (sequential reads would
// take a second).
func TestFence_ReadsAhead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		const n = 200
		for i := range n {
			plant(s, wal.Batch{Seq: uint64(i), Epoch: 1, Kind: wal.KindRecords, Records: recs("r")})
		}
		s.SetFaults(func(op, key string) mem.Fault { return mem.Fault{Latency: 5 * time.Millisecond} })
		var a applied
		start := time.Now()
		next, err := wal.Fence(t.Context(), s, layout, 2, 0, a.apply)
		if err != nil || next != n+1 {
			t.Fatalf("Fence = %d, %v; want %d", next, err, n+1)
		}
		if got := a.seqs(); len(got) != n+1 || got[n-1] != n-1 || got[n] != n {
			t.Fatalf("applied %d batches, want %d in order", len(got), n+1)
		}
		d := time.Since(start)
		// Sequential reads: n * 5 ms = 1 s. Sixteen ahead: about 75 ms.
		if d > 200*time.Millisecond {
			t.Fatalf("replaying %d batches took %v, want at most 200ms", n, d)
		}
		t.Logf("replayed %d batches in %v at 5 ms per request", n, d)
	})
}

// Fence refuses to go on after a batch the log does not hold (the local
// store is ahead: a host crash lost the log's tail), writing nothing; a
// batch below the manifest's log start (covered by a snapshot) is fine.
//
// Covers: G2, T1
func TestFence_LocalStoreAheadOfTheLog(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 0, Epoch: 1, Kind: wal.KindFence})
		var a applied
		_, err := wal.Fence(t.Context(), s, layout, 2, 3, a.apply) // the store applied 1 and 2; the log has 0
		if !errors.Is(err, wal.ErrLocalAhead) || !strings.Contains(err.Error(), layout.LogKey(2)) {
			t.Fatalf("Fence after a batch the log lost = %v; want ErrLocalAhead naming %s", err, layout.LogKey(2))
		}
		if keys := logKeys(s); len(keys) != 1 || len(a.get()) != 0 {
			t.Fatalf("Fence wrote %v or applied %v; want nothing", keys, a.seqs())
		}
		// Restored from a snapshot at 3: batch 2 is below the log start.
		s.SetRaw(layout.ManifestKey(), []byte(`{"version":1,"logStart":3,"snapshots":[3]}`))
		next, err := wal.Fence(t.Context(), s, layout, 2, 3, a.apply)
		if err != nil || next != 4 {
			t.Fatalf("Fence after a snapshot's position = %d, %v; want 4, nil", next, err)
		}
	})
}
