package wal_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/blob/seglog"
	"github.com/dexzd/dexzd/internal/testenv"
	"github.com/dexzd/dexzd/internal/wal"
	"github.com/dexzd/dexzd/internal/wal/waltest"
)

// everyStore lists one store of each backend the node runs on: memory, a
// local directory (files, and the segment log that dev and local use),
// MinIO and PostgreSQL. The last two skip (or fail, under
// DEX_TEST_REQUIRE) without scripts/testenv.sh.
var everyStore = []struct {
	name string
	open func(t testing.TB) blob.Store
}{
	{"mem", func(testing.TB) blob.Store { return mem.New() }},
	{"fs-strict", func(t testing.TB) blob.Store { return openFS(t, fs.Strict) }},
	{"segments", func(t testing.TB) blob.Store {
		dir := t.TempDir()
		inner, err := fs.Open(filepath.Join(dir, "files"), fs.Strict)
		if err != nil {
			t.Fatal(err)
		}
		s, err := seglog.Open(filepath.Join(dir, "segments"), inner, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"minio", testenv.NewS3Store},
	{"postgres", testenv.NewPostgresStore},
}

// randomLayout is a layout under a fresh prefix, so that tests may share a
// bucket or schema.
func randomLayout() wal.Layout {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return wal.MustLayout("t/"+hex.EncodeToString(rnd[:])+"/", "n1")
}

// gateStore holds back log writes while its gate is closed: the process
// that uses it is frozen just before its next batch reaches the store.
type gateStore struct {
	blob.Store
	layout  wal.Layout
	mu      sync.Mutex
	gate    chan struct{} // non-nil while closed
	entered chan uint64   // the sequence number of each held write
}

func (g *gateStore) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	g.entered = make(chan uint64, 16)
}

func (g *gateStore) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

func (g *gateStore) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	if seq, ok := g.layout.ParseLogKey(key); ok {
		g.mu.Lock()
		gate, entered := g.gate, g.entered
		g.mu.Unlock()
		if gate != nil {
			entered <- seq
			select {
			case <-gate:
			case <-ctx.Done():
				return "", blob.Transient(blob.OpPutIfAbsent, key, ctx.Err())
			}
		}
	}
	return g.Store.PutIfAbsent(ctx, key, data)
}

// leaseAt is a lease check for the tests: the lease object holds the
// epoch of its holder as text.
func leaseAt(s blob.Store, l wal.Layout, epoch uint64) wal.LeaseCheck {
	return func(ctx context.Context) error {
		data, _, err := s.Get(ctx, l.LeaseKey())
		if err != nil {
			return err
		}
		if string(data) != fmt.Sprint(epoch) {
			return fmt.Errorf("lease lost: epoch %s holds it", data)
		}
		return nil
	}
}

func setLease(t testing.TB, s blob.Store, l wal.Layout, epoch uint64) {
	t.Helper()
	ctx := context.Background()
	_, v, err := s.Get(ctx, l.LeaseKey())
	switch {
	case errors.Is(err, blob.ErrNotFound):
		_, err = s.PutIfAbsent(ctx, l.LeaseKey(), fmt.Append(nil, epoch))
	case err == nil:
		_, err = s.PutIfMatch(ctx, l.LeaseKey(), fmt.Append(nil, epoch), v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// model is one process's state in these tests: the records it applied, in
// order, and the sequence number it applies next.
type model struct {
	mu      sync.Mutex
	records [][]byte
	next    uint64
}

func (m *model) apply(b wal.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.Seq != m.next {
		return fmt.Errorf("applied batch %d, expected %d", b.Seq, m.next)
	}
	m.records = append(m.records, b.Records...)
	m.next++
	return nil
}

func (m *model) snapshot() (uint64, []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next, waltest.EncodeState(m.records)
}

// The fence a new holder writes must survive truncation: it is what stops
// the old holder's writer, however long that was frozen (issue 9, hole 1).
//
// Timeline: the epoch-7 active freezes with a batch queued for seq 3; a
// standby takes the lease (epoch 8), fences at 3, writes on past it, takes
// a snapshot at 9 and truncates below it. The epoch-7 process resumes (its
// own clock, stopped by a host suspend, says its lease is still valid):
// its write of batch 3 must fail with ErrFenced and acknowledge nothing.
// Before the fix truncation deleted the fence, the write succeeded below
// the log start and the record was acknowledged and lost.
//
// Covers: G3, G4, G7, L4
func TestFence_KeptThroughTruncation(t *testing.T) {
	t.Parallel()
	for _, st := range everyStore {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			store := st.open(t)
			l := randomLayout()

			// Epoch 7 fences an empty log and writes batches 1 and 2.
			setLease(t, store, l, 7)
			var old model
			next, err := wal.Fence(ctx, store, l, 7, 0, old.apply)
			if err != nil {
				t.Fatal(err)
			}
			gated := &gateStore{Store: store, layout: l}
			w7, err := wal.NewWriter(wal.WriterConfig{Store: gated, Layout: l, Epoch: 7, NextSeq: next, OnDurable: old.apply})
			if err != nil {
				t.Fatal(err)
			}
			w7.Start(ctx)
			defer func() { cancel(); _ = w7.Stop() }()
			var acked [][]byte
			for _, r := range []string{"e7-a", "e7-b"} {
				if _, err := w7.Submit(ctx, []byte(r)); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, []byte(r))
			}

			// It freezes with a batch on its way to seq 3.
			gated.close()
			frozen := w7.SubmitAsync([]byte("e7-frozen"))
			if seq := <-gated.entered; seq != 3 {
				t.Fatalf("the frozen write is for %d, want 3", seq)
			}

			// Epoch 8 takes over, fences at 3, writes 4..8, snapshots at 9
			// and truncates.
			setLease(t, store, l, 8)
			var cur model
			if next, err = wal.Fence(ctx, store, l, 8, 0, cur.apply); err != nil || next != 4 {
				t.Fatalf("Fence = %d, %v; want 4", next, err)
			}
			w8, err := wal.NewWriter(wal.WriterConfig{Store: store, Layout: l, Epoch: 8, NextSeq: next, OnDurable: cur.apply})
			if err != nil {
				t.Fatal(err)
			}
			w8.Start(ctx)
			for i := range 5 {
				r := fmt.Appendf(nil, "e8-%d", i)
				if _, err := w8.Submit(ctx, r); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, r)
			}
			if err := w8.Stop(); err != nil {
				t.Fatal(err)
			}
			snapSeq, data := cur.snapshot()
			if snapSeq != 9 {
				t.Fatalf("snapshot at %d, want 9", snapSeq)
			}
			if err := waltest.WriteSnapshot(ctx, store, l, snapSeq, data, leaseAt(store, l, 8), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := wal.Truncate(ctx, store, l, leaseAt(store, l, 8)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.Get(ctx, l.LogKey(3)); err != nil {
				t.Errorf("the fence at 3 is gone after truncation: %v", err)
			}
			if _, _, err := store.Get(ctx, l.LogKey(5)); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("batch 5 below the log start survived truncation: %v", err)
			}

			// Epoch 7 resumes.
			gated.open()
			if _, err := frozen.Wait(ctx); !errors.Is(err, wal.ErrFenced) {
				t.Fatalf("the resumed epoch-7 write returned %v, want ErrFenced", err)
			}
			if _, err := w7.Submit(ctx, []byte("e7-after")); err == nil {
				t.Fatal("the fenced writer acknowledged another record")
			}

			readable, _, err := waltest.Readable(ctx, store, l)
			if err != nil {
				t.Fatal(err)
			}
			if err := waltest.CheckAcked(acked, readable); err != nil {
				t.Fatal(err)
			}
		})
	}
}
