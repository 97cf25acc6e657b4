package wal_test

import (
	"context"
	"flag"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var layout = wal.MustLayout("test/", "n1")

// request is one store request seen by a recorder.
type request struct{ op, key string }

// recorder records every request made to a mem.Store (through its fault
// hook) and can inject faults.
type recorder struct {
	mu    sync.Mutex
	reqs  []request
	fault mem.FaultFunc // may be nil
}

// record installs r on s.
func record(s *mem.Store) *recorder {
	r := &recorder{}
	// The fault function runs under the recorder's lock: requests may be
	// concurrent (a replay reads ahead), fault functions need not be.
	s.SetFaults(func(op, key string) mem.Fault {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reqs = append(r.reqs, request{op, key})
		if r.fault == nil {
			return mem.Fault{}
		}
		return r.fault(op, key)
	})
	return r
}

func (r *recorder) setFault(f mem.FaultFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = f
}

func (r *recorder) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

func (r *recorder) count(op, key string) int {
	n := 0
	for _, q := range r.requests() {
		if q.op == op && q.key == key {
			n++
		}
	}
	return n
}

// hookStore calls beforePut before each PutIfAbsent it passes on.
type hookStore struct {
	*mem.Store
	beforePut func(key string)
}

func (h *hookStore) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	if h.beforePut != nil {
		h.beforePut(key)
	}
	return h.Store.PutIfAbsent(ctx, key, data)
}

// plant stores b at its key, bypassing faults.
func plant(s *mem.Store, b wal.Batch) {
	s.SetRaw(layout.LogKey(b.Seq), wal.Encode(b))
}

func recs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// stored decodes the batch at seq or fails the test.
func stored(t *testing.T, s *mem.Store, seq uint64) wal.Batch {
	t.Helper()
	data, ok := s.Raw(layout.LogKey(seq))
	if !ok {
		t.Fatalf("no batch at %d", seq)
	}
	b, err := wal.DecodeAt(layout.LogKey(seq), seq, data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logKeys returns the log keys in the store.
func logKeys(s *mem.Store) []string {
	var out []string
	for _, k := range s.Keys() {
		if _, ok := layout.ParseLogKey(k); ok {
			out = append(out, k)
		}
	}
	return out
}

// applied collects the batches handed to an apply or OnDurable func.
type applied struct {
	mu      sync.Mutex
	batches []wal.Batch
}

func (a *applied) apply(b wal.Batch) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches = append(a.batches, b)
	return nil
}

func (a *applied) get() []wal.Batch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.batches)
}

func (a *applied) seqs() []uint64 {
	var out []uint64
	for _, b := range a.get() {
		out = append(out, b.Seq)
	}
	return out
}
