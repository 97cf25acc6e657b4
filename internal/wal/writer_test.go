package wal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
)

// newWriter starts a writer of epoch 7 at sequence number 0 on s; it is
// stopped when the test ends.
func newWriter(t *testing.T, s blob.Store, tweak func(*wal.WriterConfig)) (*wal.Writer, *applied) {
	t.Helper()
	a := &applied{}
	cfg := wal.WriterConfig{Store: s, Layout: layout, Epoch: 7, OnDurable: a.apply}
	if tweak != nil {
		tweak(&cfg)
	}
	w, err := wal.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Start(t.Context())
	t.Cleanup(func() { w.Stop() })
	return w, a
}

func isDone(f wal.Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

func latency(d time.Duration) mem.FaultFunc {
	return func(op, key string) mem.Fault {
		if op == blob.OpPutIfAbsent {
			return mem.Fault{Latency: d}
		}
		return mem.Fault{}
	}
}

// Submit returns only once the batch is durable and OnDurable has returned;
// OnDurable sees the batch in the store and its submitter not yet told.
//
// Covers: G3, G1, L4
func TestWriter_AcknowledgesAfterDurableAndApplied(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(100 * time.Millisecond))
		var fut wal.Future
		var ready sync.WaitGroup
		ready.Add(1)
		w, _ := newWriter(t, s, func(c *wal.WriterConfig) {
			c.OnDurable = func(b wal.Batch) error {
				ready.Wait()
				if _, ok := s.Raw(layout.LogKey(b.Seq)); !ok {
					t.Error("OnDurable ran before the batch was durable")
				}
				if isDone(fut) {
					t.Error("the submitter was told before OnDurable returned")
				}
				return nil
			}
		})
		start := time.Now()
		fut = w.SubmitAsync([]byte("r1"))
		ready.Done()
		time.Sleep(99 * time.Millisecond)
		synctest.Wait()
		if isDone(fut) {
			t.Fatal("acknowledged before the store accepted the batch")
		}
		seq, err := fut.Result()
		if err != nil || seq != 0 || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("Result = %d, %v after %v", seq, err, time.Since(start))
		}
		b := stored(t, s, 0)
		if b.Epoch != 7 || b.Kind != wal.KindRecords || string(b.Records[0]) != "r1" {
			t.Fatalf("stored %+v", b)
		}
		// L4: every log write is a create-if-absent, and the store holds
		// only batches stamped with the writer's epoch.
		for _, q := range rec.requests() {
			if q.op != blob.OpPutIfAbsent && q.op != blob.OpGet {
				t.Errorf("unexpected request %v", q)
			}
		}
	})
}

// Records submitted while a batch is in flight gather into the next batch;
// only one write is in flight at a time.
//
// Covers: G1, G3
func TestWriter_GroupCommit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(time.Second))
		w, a := newWriter(t, s, nil)
		first := w.SubmitAsync([]byte("r0"))
		synctest.Wait() // batch 0 is in flight
		var rest []wal.Future
		for i := 1; i <= 5; i++ {
			rest = append(rest, w.SubmitAsync(fmt.Appendf(nil, "r%d", i)))
		}
		if seq, err := first.Result(); seq != 0 || err != nil {
			t.Fatalf("first = %d, %v", seq, err)
		}
		for _, f := range rest {
			if seq, err := f.Result(); seq != 1 || err != nil {
				t.Fatalf("rest = %d, %v", seq, err)
			}
		}
		got := a.get()
		if len(got) != 2 || len(got[0].Records) != 1 || len(got[1].Records) != 5 {
			t.Fatalf("batches %+v, want [r0] then [r1..r5]", got)
		}
		if string(got[1].Records[0]) != "r1" || string(got[1].Records[4]) != "r5" {
			t.Fatalf("records out of order: %q", got[1].Records)
		}
		if n := s.Count(blob.OpPutIfAbsent); n != 2 {
			t.Fatalf("%d writes, want 2", n)
		}
		st := w.Stats()
		if st.Batches != 2 || st.Records != 6 || st.Retries != 0 || st.Bytes == 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// With many concurrent submitters and a store latency, records share
// batches: fewer batches than records, each record exactly once, in each
// submitter's order, and never two writes in flight.
//
// Covers: G1, G3
func TestWriter_GroupCommitConcurrent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: 10 * time.Millisecond}
			}
			return mem.Fault{}
		})
		// Writes in flight, counted around the store's PutIfAbsent.
		counting := &inflightStore{Store: s}
		w, a := newWriter(t, s, func(c *wal.WriterConfig) { c.Store = counting })
		const submitters, each = 64, 10
		var wg sync.WaitGroup
		for i := range submitters {
			wg.Go(func() {
				last := uint64(0)
				for j := range each {
					seq, err := w.Submit(t.Context(), fmt.Appendf(nil, "%d/%d", i, j))
					if err != nil || seq < last {
						t.Errorf("Submit = %d, %v (previous %d)", seq, err, last)
					}
					last = seq
				}
			})
		}
		wg.Wait()
		seen := map[string]int{}
		for _, b := range a.get() {
			for _, r := range b.Records {
				seen[string(r)]++
			}
		}
		if len(seen) != submitters*each {
			t.Fatalf("%d distinct records, want %d", len(seen), submitters*each)
		}
		for r, n := range seen {
			if n != 1 {
				t.Fatalf("record %s written %d times", r, n)
			}
		}
		st := w.Stats()
		if st.Records != submitters*each || st.Batches >= st.Records || st.Batches > 2*each+1 {
			t.Fatalf("stats %+v: group commit did not batch", st)
		}
		if m := counting.maxInflight(); m != 1 {
			t.Fatalf("%d writes in flight at once", m)
		}
	})
}

// inflightStore counts the PutIfAbsent calls in progress.
type inflightStore struct {
	blob.Store
	mu            sync.Mutex
	inflight, max int
}

func (s *inflightStore) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	s.mu.Lock()
	s.inflight++
	s.max = max(s.max, s.inflight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	return s.Store.PutIfAbsent(ctx, key, data)
}

func (s *inflightStore) maxInflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// Covers: G1
func TestWriter_BatchLimits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(time.Second))
		w, a := newWriter(t, s, func(c *wal.WriterConfig) {
			c.MaxBatchRecords = 3
			c.MaxBatchBytes = 40
		})
		if _, err := w.Submit(t.Context(), make([]byte, 37)); !errors.Is(err, wal.ErrRecordTooLarge) {
			t.Fatalf("got %v, want ErrRecordTooLarge", err)
		}
		w.SubmitAsync([]byte("x"))
		synctest.Wait()
		var futs []wal.Future
		for _, r := range []string{"a", "b", "c", "d", strings.Repeat("e", 30), "f"} {
			futs = append(futs, w.SubmitAsync([]byte(r)))
		}
		for _, f := range futs {
			if _, err := f.Result(); err != nil {
				t.Fatal(err)
			}
		}
		var sizes []int
		for _, b := range a.get() {
			sizes = append(sizes, len(b.Records))
		}
		// [x], then [a b c] (record limit), [d eee…] (byte limit: 5+34 <= 40), [f].
		if want := []int{1, 3, 2, 1}; !slices.Equal(sizes, want) {
			t.Fatalf("batch sizes %v, want %v", sizes, want)
		}
	})
}

// A write whose reply was lost is not acknowledged until a later attempt
// confirms it by reading the key back and finding its own bytes.
//
// Covers: G5, G3
func TestWriter_ReplyLostRetryFindsOwnBatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		puts := 0
		rec.setFault(func(op, key string) mem.Fault {
			switch op {
			case blob.OpPutIfAbsent:
				puts++
				if puts == 1 {
					return mem.Fault{Err: mem.ErrServer, Lands: true}
				}
			case blob.OpGet:
				return mem.Fault{Latency: time.Second}
			}
			return mem.Fault{}
		})
		w, a := newWriter(t, s, nil)
		start := time.Now()
		fut := w.SubmitAsync([]byte("r"))
		time.Sleep(50*time.Millisecond + 999*time.Millisecond)
		synctest.Wait()
		if isDone(fut) || len(a.get()) != 0 {
			t.Fatal("acknowledged or applied before the read-back confirmed the write")
		}
		seq, err := fut.Result()
		// First attempt at 0 (landed, reply lost), backoff 50 ms, second
		// attempt loses, read-back takes 1 s.
		if err != nil || seq != 0 || time.Since(start) != 1050*time.Millisecond {
			t.Fatalf("Result = %d, %v after %v", seq, err, time.Since(start))
		}
		if st := w.Stats(); st.Adopted != 1 || st.Retries != 1 || st.Batches != 1 {
			t.Fatalf("stats %+v", st)
		}
		if len(logKeys(s)) != 1 || len(a.get()) != 1 {
			t.Fatal("want exactly one batch written and applied")
		}
		// The writer goes on at the next sequence number.
		if seq, err := w.Submit(t.Context(), []byte("next")); seq != 1 || err != nil {
			t.Fatalf("next Submit = %d, %v", seq, err)
		}
	})
}

// An attempt cut off by its timeout lands later; a later attempt finds it.
//
// Covers: G5, L10
func TestWriter_CutOffAttemptLandsLater(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		puts := 0
		rec.setFault(func(op, key string) mem.Fault {
			if op != blob.OpPutIfAbsent {
				return mem.Fault{}
			}
			puts++
			switch puts {
			case 1: // cut off at 2 s, lands at 3 s
				return mem.Fault{Latency: 3 * time.Second, Lands: true}
			case 2: // from 2.05 s, cut off at 4.05 s, never lands
				return mem.Fault{Latency: time.Hour}
			}
			return mem.Fault{}
		})
		w, _ := newWriter(t, s, nil)
		start := time.Now()
		seq, err := w.Submit(t.Context(), []byte("r"))
		// third attempt after a 100 ms backoff finds the landed batch
		if err != nil || seq != 0 || time.Since(start) != 4150*time.Millisecond {
			t.Fatalf("Submit = %d, %v after %v", seq, err, time.Since(start))
		}
		if st := w.Stats(); st.Adopted != 1 || st.Retries != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// 409 ConditionalRequestConflict, 5xx and throttling are transient: the same
// bytes are retried with backoff (50, 100, 200 ms).
//
// Covers: G5, L10
func TestWriter_TransientErrorsRetried(t *testing.T) {
	t.Parallel()
	for _, e := range []error{mem.ErrConflict, mem.ErrServer, mem.ErrThrottled} {
		t.Run(e.Error(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				rec := record(s)
				puts := 0
				rec.setFault(func(op, key string) mem.Fault {
					if op == blob.OpPutIfAbsent {
						if puts++; puts <= 3 {
							return mem.Fault{Err: e}
						}
					}
					return mem.Fault{}
				})
				w, _ := newWriter(t, s, nil)
				start := time.Now()
				seq, err := w.Submit(t.Context(), []byte("r"))
				if err != nil || seq != 0 || time.Since(start) != 350*time.Millisecond {
					t.Fatalf("Submit = %d, %v after %v", seq, err, time.Since(start))
				}
				if st := w.Stats(); st.Retries != 3 || st.Adopted != 0 {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
}

// A writer that finds its sequence number taken by a higher epoch stops at
// once: the batch in flight and every pending submit fail, nothing is
// applied or acknowledged, nothing further is written, later submits fail.
//
// Covers: G4, L4
func TestWriter_FencedStopsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(100 * time.Millisecond))
		w, a := newWriter(t, s, nil)
		ok := w.SubmitAsync([]byte("acked"))
		if _, err := ok.Result(); err != nil {
			t.Fatal(err)
		}
		// The new holder fences at 1 while batch 1 is in flight.
		first := w.SubmitAsync([]byte("in flight"))
		synctest.Wait()
		plant(s, wal.Batch{Seq: 1, Epoch: 8, Kind: wal.KindFence})
		var pending []wal.Future
		for i := range 5 {
			pending = append(pending, w.SubmitAsync(fmt.Appendf(nil, "p%d", i)))
		}
		for _, f := range append(pending, first) {
			if _, err := f.Result(); !errors.Is(err, wal.ErrFenced) {
				t.Fatalf("pending submit: %v, want ErrFenced", err)
			}
		}
		<-w.Done()
		if err := w.Err(); !errors.Is(err, wal.ErrFenced) || !strings.Contains(err.Error(), "epoch 8") {
			t.Fatalf("Err = %v", err)
		}
		if _, err := w.Submit(t.Context(), []byte("late")); !errors.Is(err, wal.ErrFenced) {
			t.Fatalf("late submit: %v", err)
		}
		if got := a.seqs(); !slices.Equal(got, []uint64{0}) {
			t.Fatalf("applied %v, want only batch 0", got)
		}
		if n := s.Count(blob.OpPutIfAbsent); n != 2 {
			t.Fatalf("%d writes, want 2: nothing after the fence", n)
		}
		if keys := logKeys(s); len(keys) != 2 || stored(t, s, 1).Epoch != 8 {
			t.Fatalf("log %v", keys)
		}
	})
}

// The store not accepting a batch within LogWriteLimit of its first attempt
// stops the writer with ErrLogWriteTimeout at exactly that moment (L10),
// whether requests hang or fail fast; the limit is per batch, counted from
// its first attempt, not from the submit.
//
// Covers: L10, G3
func TestWriter_LogWriteTimeout(t *testing.T) {
	t.Parallel()
	cases := map[string]mem.Fault{
		"hang":      {Latency: time.Hour},
		"5xx":       {Err: mem.ErrServer},
		"throttled": {Err: mem.ErrThrottled, Latency: 300 * time.Millisecond},
		"409":       {Err: mem.ErrConflict},
	}
	for name, fault := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				rec := record(s)
				// Batch 0 takes 1.5 s and succeeds; batch 1 never does.
				rec.setFault(func(op, key string) mem.Fault {
					if op != blob.OpPutIfAbsent {
						return mem.Fault{}
					}
					if key == layout.LogKey(0) {
						return mem.Fault{Latency: 1500 * time.Millisecond}
					}
					return fault
				})
				w, a := newWriter(t, s, nil)
				start := time.Now()
				f0 := w.SubmitAsync([]byte("r0"))
				synctest.Wait()
				f1 := w.SubmitAsync([]byte("r1"))
				if _, err := f0.Result(); err != nil {
					t.Fatal(err)
				}
				firstAttempt := time.Now()
				_, err := f1.Result()
				if !errors.Is(err, wal.ErrLogWriteTimeout) {
					t.Fatalf("got %v, want ErrLogWriteTimeout", err)
				}
				if d := time.Since(firstAttempt); d != wal.LogWriteLimit {
					t.Fatalf("stopped %v after the first attempt, want exactly %v", d, wal.LogWriteLimit)
				}
				<-w.Done()
				if time.Since(start) != 1500*time.Millisecond+wal.LogWriteLimit {
					t.Fatalf("Done after %v", time.Since(start))
				}
				if !errors.Is(w.Err(), wal.ErrLogWriteTimeout) || len(a.get()) != 1 {
					t.Fatalf("Err %v, applied %d", w.Err(), len(a.get()))
				}
			})
		})
	}
}

// A store that recovers just inside the limit does not stop the writer.
//
// Covers: L10
func TestWriter_RecoversWithinLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		start := time.Now()
		rec.setFault(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent && time.Since(start) < 9500*time.Millisecond {
				return mem.Fault{Err: mem.ErrServer}
			}
			return mem.Fault{}
		})
		w, _ := newWriter(t, s, nil)
		if _, err := w.Submit(t.Context(), []byte("r")); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 9500*time.Millisecond || d >= wal.LogWriteLimit {
			t.Fatalf("took %v", d)
		}
	})
}

// Permanent errors, corruption at the writer's key, a lower epoch at its key
// and a failing OnDurable all stop the writer at once.
//
// Covers: G4, G1
func TestWriter_FatalErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("local store full")
	cases := []struct {
		name  string
		setup func(s *mem.Store, rec *recorder, cfg *wal.WriterConfig)
		want  error
	}{
		{"permanent", func(s *mem.Store, rec *recorder, _ *wal.WriterConfig) {
			rec.setFault(func(op, key string) mem.Fault {
				return mem.Fault{Err: blob.Permanent(op, key, mem.ErrDenied)}
			})
		}, blob.ErrPermanent},
		{"corrupt at our key", func(s *mem.Store, _ *recorder, _ *wal.WriterConfig) {
			s.SetRaw(layout.LogKey(0), []byte("garbage"))
		}, wal.ErrCorrupt},
		{"lower epoch at our key", func(s *mem.Store, _ *recorder, _ *wal.WriterConfig) {
			plant(s, wal.Batch{Seq: 0, Epoch: 6, Kind: wal.KindRecords})
		}, wal.ErrLogConflict},
		{"same epoch, other batch", func(s *mem.Store, _ *recorder, _ *wal.WriterConfig) {
			plant(s, wal.Batch{Seq: 0, Epoch: 7, Kind: wal.KindRecords, Records: recs("other")})
		}, wal.ErrLogConflict},
		{"OnDurable fails", func(_ *mem.Store, _ *recorder, cfg *wal.WriterConfig) {
			cfg.OnDurable = func(wal.Batch) error { return boom }
		}, boom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				rec := record(s)
				w, _ := newWriter(t, s, func(cfg *wal.WriterConfig) { tc.setup(s, rec, cfg) })
				start := time.Now()
				if _, err := w.Submit(t.Context(), []byte("r")); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				<-w.Done()
				if !errors.Is(w.Err(), tc.want) || time.Since(start) != 0 {
					t.Fatalf("Err = %v after %v", w.Err(), time.Since(start))
				}
				if errors.Is(tc.want, wal.ErrCorrupt) && !strings.Contains(w.Err().Error(), layout.LogKey(0)) {
					t.Fatalf("corruption error does not name the key: %v", w.Err())
				}
			})
		})
	}
}

// Stop writes what was submitted before it and refuses later submits; Err
// stays nil.
//
// Covers: G3
func TestWriter_StopFlushes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(time.Second))
		w, a := newWriter(t, s, nil)
		var futs []wal.Future
		for i := range 3 {
			futs = append(futs, w.SubmitAsync(fmt.Appendf(nil, "r%d", i)))
			synctest.Wait()
		}
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
		for _, f := range futs {
			if _, err := f.Result(); err != nil {
				t.Fatal(err)
			}
		}
		if len(a.get()) != 2 { // [r0], [r1 r2]
			t.Fatalf("applied %d batches", len(a.get()))
		}
		if _, err := w.Submit(t.Context(), []byte("late")); !errors.Is(err, wal.ErrStopped) {
			t.Fatalf("submit after Stop: %v", err)
		}
	})
}

// Cancelling Start's context abandons the batch in flight: its submitters
// and the queued ones get ErrStopped, not an acknowledgement.
//
// Covers: G3
func TestWriter_AbortByContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(time.Second))
		ctx, cancel := context.WithCancel(t.Context())
		var a applied
		w, _ := wal.NewWriter(wal.WriterConfig{Store: s, Layout: layout, Epoch: 7, OnDurable: a.apply})
		w.Start(ctx)
		f0 := w.SubmitAsync([]byte("r0"))
		synctest.Wait()
		f1 := w.SubmitAsync([]byte("r1"))
		cancel()
		for _, f := range []wal.Future{f0, f1} {
			if _, err := f.Result(); !errors.Is(err, wal.ErrStopped) || !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v", err)
			}
		}
		<-w.Done()
		if w.Err() != nil || len(a.get()) != 0 || w.Stop() != nil {
			t.Fatalf("Err %v, applied %d", w.Err(), len(a.get()))
		}
	})
}

// Covers: G3
func TestWriter_SubmitContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(time.Second))
		w, a := newWriter(t, s, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if _, err := w.Submit(ctx, []byte("r")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		if _, err := w.Submit(ctx, []byte("not queued")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		// The first record is still written; the second was never queued.
		if err := w.Stop(); err != nil || len(a.get()) != 1 || len(a.get()[0].Records) != 1 {
			t.Fatalf("Stop %v, applied %+v", err, a.get())
		}
	})
}

func TestWriter_Lifecycle(t *testing.T) {
	t.Parallel()
	s := mem.New()
	var a applied
	for _, cfg := range []wal.WriterConfig{
		{Layout: layout, OnDurable: a.apply},
		{Store: s, OnDurable: a.apply},
		{Store: s, Layout: layout},
		{Store: s, Layout: layout, OnDurable: a.apply, MaxBatchRecords: wal.MaxRecordsPerBatch + 1},
	} {
		if _, err := wal.NewWriter(cfg); err == nil {
			t.Errorf("NewWriter(%+v) accepted", cfg)
		}
	}
	// Stop before Start fails what was queued and closes Done.
	w, _ := wal.NewWriter(wal.WriterConfig{Store: s, Layout: layout, OnDurable: a.apply})
	f := w.SubmitAsync([]byte("r"))
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	if _, err := f.Result(); !errors.Is(err, wal.ErrStopped) {
		t.Fatalf("got %v", err)
	}
	w.Start(t.Context()) // no-op after Stop
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
}

// OnBatch reports every durable batch once, in sequence order, after
// OnDurable and before its submitters are told: the write's duration
// (retries included, OnDurable not), the encoded size and the record count.
// A batch that fails is not reported.
func TestWriter_OnBatchReportsDurableBatches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		puts := 0
		rec.setFault(func(op, key string) mem.Fault {
			if op != blob.OpPutIfAbsent {
				return mem.Fault{}
			}
			puts++
			if puts == 2 { // batch 1's first attempt: one retry after 50 ms
				return mem.Fault{Err: mem.ErrServer}
			}
			return mem.Fault{Latency: 100 * time.Millisecond}
		})
		var got []wal.BatchStats
		var mu sync.Mutex
		futs := map[uint64][]wal.Future{} // per batch
		applied := map[uint64]bool{}
		w, _ := newWriter(t, s, func(c *wal.WriterConfig) {
			c.OnDurable = func(b wal.Batch) error {
				time.Sleep(time.Second) // not part of the write's duration
				applied[b.Seq] = true
				return nil
			}
			c.OnBatch = func(b wal.BatchStats) {
				if !applied[b.Seq] {
					t.Errorf("OnBatch for batch %d before OnDurable", b.Seq)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, f := range futs[b.Seq] {
					if isDone(f) {
						t.Errorf("OnBatch for batch %d after its submitter was told", b.Seq)
					}
				}
				got = append(got, b)
			}
		})
		submit := func(seq uint64, r string) {
			mu.Lock()
			defer mu.Unlock()
			futs[seq] = append(futs[seq], w.SubmitAsync([]byte(r)))
		}
		submit(0, "r0")
		synctest.Wait() // batch 0 is in flight
		for i := 1; i <= 3; i++ {
			submit(1, fmt.Sprintf("rec%d", i))
		}
		for seq := range uint64(2) {
			for _, f := range futs[seq] {
				if got, err := f.Result(); got != seq || err != nil {
					t.Fatalf("Result = %d, %v; want %d", got, err, seq)
				}
			}
		}
		b0 := wal.Encode(wal.Batch{Seq: 0, Epoch: 7, Kind: wal.KindRecords, Records: recs("r0")})
		b1 := wal.Encode(wal.Batch{Seq: 1, Epoch: 7, Kind: wal.KindRecords, Records: recs("rec1", "rec2", "rec3")})
		want := []wal.BatchStats{
			{Seq: 0, Duration: 100 * time.Millisecond, Bytes: len(b0), Records: 1},
			{Seq: 1, Duration: 150 * time.Millisecond, Bytes: len(b1), Records: 3},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("OnBatch saw %+v, want %+v", got, want)
		}

		s.SetFaults(func(op, key string) mem.Fault { return mem.Fault{Err: mem.ErrDenied} })
		if _, err := w.Submit(t.Context(), []byte("lost")); err == nil {
			t.Fatal("Submit on a failing store succeeded")
		}
		if len(got) != 2 {
			t.Fatalf("OnBatch saw a failed batch: %+v", got[2:])
		}
	})
}

// A durable batch is applied while the next one is written: OnDurable of
// batch 0 can wait for the write of batch 1 to begin.
func TestWriter_AppliesWhileTheNextBatchIsWritten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		writing1 := make(chan struct{})
		var once sync.Once
		rec := record(s)
		rec.setFault(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent && key == layout.LogKey(1) {
				once.Do(func() { close(writing1) })
			}
			return mem.Fault{Latency: 10 * time.Millisecond}
		})
		applied0 := make(chan struct{})
		w, _ := newWriter(t, s, func(c *wal.WriterConfig) {
			inner := c.OnDurable
			c.OnDurable = func(b wal.Batch) error {
				if b.Seq == 0 {
					select {
					case <-writing1:
					case <-time.After(time.Second):
						return errors.New("batch 1 was not written while batch 0 was applied")
					}
					close(applied0)
				}
				return inner(b)
			}
		})
		f0 := w.SubmitAsync([]byte("a"))
		synctest.Wait() // batch 0 is being written
		f1 := w.SubmitAsync([]byte("b"))
		for i, f := range []wal.Future{f0, f1} {
			if seq, err := f.Result(); err != nil || seq != uint64(i) {
				t.Fatalf("record %d: %d, %v", i, seq, err)
			}
		}
		<-applied0
	})
}
