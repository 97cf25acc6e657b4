package wal_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
)

// An idle follower costs one GET of the next batch's key per poll, plus one
// manifest GET on its first miss and every TruncationCheckEvery-th miss, and
// never a List.
//
// Covers: G8
func TestFollower_IdleCostsOneGetPerPoll(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 5, Epoch: 1, Kind: wal.KindFence})
		rec := record(s)
		f := wal.NewFollower(s, layout, 5)
		const poll = 250 * time.Millisecond
		const polls = 100
		ctx, cancel := context.WithTimeout(t.Context(), polls*poll-poll/2)
		defer cancel()
		var a applied
		if err := f.Follow(ctx, poll, a.apply); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Follow: %v", err)
		}
		if got := a.seqs(); !slices.Equal(got, []uint64{5}) {
			t.Fatalf("applied %v", got)
		}
		// The first poll found batch 5 and went on at once to 6.
		if n := rec.count(blob.OpGet, layout.LogKey(6)); n != polls {
			t.Errorf("%d GETs of the next batch in %d polls", n, polls)
		}
		if n := rec.count(blob.OpGet, layout.ManifestKey()); n != 1+polls/wal.TruncationCheckEvery {
			t.Errorf("%d manifest GETs, want %d", n, 1+polls/wal.TruncationCheckEvery)
		}
		if n := s.Count(blob.OpList); n != 0 {
			t.Errorf("%d Lists, want 0", n)
		}
		if total := len(rec.requests()); total != 1+polls+1+polls/wal.TruncationCheckEvery {
			t.Errorf("%d requests in all: %v", total, rec.requests())
		}
	})
}

// A follower applies exactly what the writer wrote, fence included, in
// order.
//
// Covers: G8, G2
func TestFollower_FollowsWriter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		var active applied
		next, err := wal.Fence(t.Context(), s, layout, 7, 0, active.apply)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := newWriter(t, s, func(c *wal.WriterConfig) {
			c.NextSeq = next
			c.OnDurable = active.apply
		})
		ctx, cancel := context.WithCancel(t.Context())
		var standby applied
		done := make(chan error)
		f := wal.NewFollower(s, layout, 0)
		go func() { done <- f.Follow(ctx, 100*time.Millisecond, standby.apply) }()
		for _, r := range []string{"a", "b", "c"} {
			if _, err := w.Submit(t.Context(), []byte(r)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		a, b := active.get(), standby.get()
		if len(a) != 4 || len(b) != len(a) {
			t.Fatalf("active applied %d, standby %d", len(a), len(b))
		}
		for i := range a {
			if !sameBatch(a[i], b[i]) {
				t.Fatalf("batch %d differs: %+v vs %+v", i, a[i], b[i])
			}
		}
		if f.NextSeq() != 4 || f.Epoch() != 7 {
			t.Fatalf("NextSeq %d, Epoch %d", f.NextSeq(), f.Epoch())
		}
	})
}

// Covers: G8, G1
func TestFollower_Corruption(t *testing.T) {
	t.Parallel()
	cases := map[string]func(s *mem.Store){
		"garbage": func(s *mem.Store) { s.SetRaw(layout.LogKey(1), []byte("garbage")) },
		"bit flip": func(s *mem.Store) {
			data := wal.Encode(wal.Batch{Seq: 1, Epoch: 2, Kind: wal.KindRecords, Records: recs("x")})
			data[27] ^= 4
			s.SetRaw(layout.LogKey(1), data)
		},
		"wrong seq": func(s *mem.Store) {
			s.SetRaw(layout.LogKey(1), wal.Encode(wal.Batch{Seq: 2, Epoch: 2, Kind: wal.KindRecords}))
		},
		"epoch backwards": func(s *mem.Store) { plant(s, wal.Batch{Seq: 1, Epoch: 1, Kind: wal.KindRecords}) },
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				plant(s, wal.Batch{Seq: 0, Epoch: 2, Kind: wal.KindFence})
				setup(s)
				f := wal.NewFollower(s, layout, 0)
				var a applied
				err := f.Follow(t.Context(), time.Second, a.apply)
				var ce *wal.CorruptError
				if !errors.As(err, &ce) || ce.Key != layout.LogKey(1) || !strings.Contains(err.Error(), layout.LogKey(1)) {
					t.Fatalf("got %v, want corruption naming %s", err, layout.LogKey(1))
				}
				if len(a.get()) != 1 || f.NextSeq() != 1 {
					t.Fatalf("applied %d, next %d", len(a.get()), f.NextSeq())
				}
			})
		})
	}
}

// A follower that truncation passed gets ErrTruncated: at once on its first
// miss, or within TruncationCheckEvery polls if truncation happens while it
// is idle.
//
// Covers: G7, G8
func TestFollower_Truncated(t *testing.T) {
	t.Parallel()
	truncate := func(s *mem.Store, logStart uint64) {
		s.SetRaw(layout.ManifestKey(), []byte(`{"version":1,"logStart":`+itoa(logStart)+`,"snapshots":[`+itoa(logStart)+`]}`))
		for seq := range logStart {
			_ = s.Delete(context.Background(), layout.LogKey(seq))
		}
	}
	t.Run("on the first miss", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			plant(s, wal.Batch{Seq: 10, Epoch: 1, Kind: wal.KindFence})
			truncate(s, 10)
			f := wal.NewFollower(s, layout, 3)
			if _, err := f.Next(t.Context()); !errors.Is(err, wal.ErrTruncated) {
				t.Fatalf("got %v, want ErrTruncated", err)
			}
		})
	})
	t.Run("while idle", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			f := wal.NewFollower(s, layout, 0)
			if _, err := f.Next(t.Context()); !errors.Is(err, wal.ErrNoBatch) {
				t.Fatalf("got %v", err)
			}
			for seq := range uint64(12) {
				plant(s, wal.Batch{Seq: seq, Epoch: 1, Kind: wal.KindFence})
			}
			truncate(s, 10)
			misses := 1
			var err error
			for ; misses < 100; misses++ {
				if _, err = f.Next(t.Context()); !errors.Is(err, wal.ErrNoBatch) {
					break
				}
			}
			if !errors.Is(err, wal.ErrTruncated) || misses+1 != wal.TruncationCheckEvery {
				t.Fatalf("after %d misses: %v", misses+1, err)
			}
			if err := f.CheckTruncated(t.Context()); !errors.Is(err, wal.ErrTruncated) {
				t.Fatalf("CheckTruncated: %v", err)
			}
		})
	})
	t.Run("batch still there", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			// The manifest moved past our position but the batch is not
			// deleted yet: no false alarm, and the batch is read.
			s := mem.New()
			s.SetRaw(layout.ManifestKey(), []byte(`{"version":1,"logStart":10,"snapshots":[10]}`))
			plant(s, wal.Batch{Seq: 3, Epoch: 1, Kind: wal.KindFence})
			f := wal.NewFollower(s, layout, 3)
			if err := f.CheckTruncated(t.Context()); err != nil {
				t.Fatal(err)
			}
			if b, err := f.Next(t.Context()); err != nil || b.Seq != 3 {
				t.Fatalf("Next = %+v, %v", b, err)
			}
		})
	})
}

// Transient errors are retried at the next poll; a permanent error ends
// Follow.
//
// Covers: G8
func TestFollower_StoreErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		plant(s, wal.Batch{Seq: 0, Epoch: 1, Kind: wal.KindFence})
		plant(s, wal.Batch{Seq: 1, Epoch: 1, Kind: wal.KindRecords})
		rec := record(s)
		gets := 0
		rec.setFault(func(op, key string) mem.Fault {
			gets++
			switch {
			case gets <= 3:
				return mem.Fault{Err: mem.ErrThrottled}
			case key == layout.LogKey(2):
				return mem.Fault{Err: blob.Permanent(op, key, mem.ErrDenied)}
			}
			return mem.Fault{}
		})
		f := wal.NewFollower(s, layout, 0)
		var a applied
		start := time.Now()
		err := f.Follow(t.Context(), time.Second, a.apply)
		if blob.Classify(err) != blob.ErrPermanent || len(a.get()) != 2 {
			t.Fatalf("Follow: %v, applied %d", err, len(a.get()))
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("took %v, want three polls", d)
		}
	})
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
