package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/wal"
)

// localStore is a process's local store: a flowstore.MemStore whose
// applies and snapshots exclude each other, so that a snapshot is the
// state after exactly one batch (what a Pebble checkpoint gives the
// node). The snapshot data is the simulator's own format (JSON of every
// run's engine.MarshalState encoding and the flow type index); package wal treats it as
// opaque.
type localStore struct {
	*flowstore.MemStore
	mu sync.Mutex
}

var _ flowstore.Store = (*localStore)(nil)

func newLocalStore() *localStore { return &localStore{MemStore: flowstore.NewMemStore()} }

// Apply implements flowstore.Store.
func (s *localStore) Apply(seq uint64, fn func(tx flowstore.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.MemStore.Apply(seq, fn)
}

type snapshotData struct {
	Seq   uint64      `json:"seq"`
	Runs  [][]byte    `json:"runs"` // engine.MarshalState; the latest run of each flow last
	Types [][3]string `json:"types"`
}

// snapshot encodes the store; ok is false when it applied nothing.
func (s *localStore) snapshot() (seq uint64, data []byte, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok = s.Applied()
	if !ok {
		return 0, nil, false, nil
	}
	d := snapshotData{Seq: seq}
	runs, latest := s.EncodedRuns()
	for _, id := range slices.Sorted(maps.Keys(runs)) {
		for _, run := range slices.Sorted(maps.Keys(runs[id])) {
			if run != latest[id] {
				d.Runs = append(d.Runs, runs[id][run])
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(runs)) {
		d.Runs = append(d.Runs, runs[id][latest[id]])
	}
	err = s.FlowTypes(func(flowType, flowID, runID string) error {
		d.Types = append(d.Types, [3]string{flowType, flowID, runID})
		return nil
	})
	if err != nil {
		return 0, nil, false, err
	}
	data, err = json.Marshal(d)
	return seq, data, true, err
}

// restoreLocal builds a local store from snapshot data.
func restoreLocal(data []byte) (*localStore, error) {
	var d snapshotData
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	s := newLocalStore()
	err := s.Apply(d.Seq, func(tx flowstore.Tx) error {
		for _, raw := range d.Runs {
			st, err := engine.UnmarshalState(raw)
			if err != nil {
				return err
			}
			if err := tx.PutFlow(st); err != nil {
				return err
			}
		}
		for _, t := range d.Types {
			if err := tx.PutFlowType(t[0], t[1], t[2]); err != nil {
				return err
			}
		}
		return nil
	})
	return s, err
}

// loadLatest restores the newest snapshot; ok is false when there is none.
func loadLatest(ctx context.Context, store blob.Store, layout wal.Layout) (*localStore, bool, error) {
	next, r, ok, err := wal.OpenLatest(ctx, store, layout)
	if err != nil || !ok {
		return nil, false, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, false, fmt.Errorf("read snapshot %d: %w", next, err)
	}
	s, err := restoreLocal(data)
	if err != nil {
		return nil, false, err
	}
	if seq, _ := s.Applied(); seq+1 != next {
		return nil, false, fmt.Errorf("snapshot %d holds the state after batch %d", next, seq)
	}
	return s, true, nil
}

// snapshots is the active process's snapshotter: at moments drawn from
// the seed it writes a snapshot of its local store and truncates the log
// (wal.WriteSnapshotFrom, wal.Truncate, with the holder's lease check
// before every write and delete, G7), like node's snapshotter.
func (p *proc) snapshots(ctx context.Context, h *lease.Holder, store *localStore) {
	for i := uint64(0); ; i++ {
		d := time.Duration(3000+hash(p.sim.cfg.Seed, fmt.Sprintf("snap/%d/%d", p.id, h.Epoch()), i)%7000) * time.Millisecond
		if !lease.Sleep(ctx, d) {
			return
		}
		seq, data, ok, err := store.snapshot()
		if err != nil {
			p.sim.fail("p%d: snapshot of the local store: %v", p.id, err)
			return
		}
		if !ok {
			continue
		}
		if _, err := wal.WriteSnapshotFrom(ctx, p.store, p.sim.layout, seq+1, bytes.NewReader(data), h.Check, 2); err != nil {
			p.sim.event("p%d: snapshot %d: %v", p.id, seq+1, err)
			continue
		}
		n, err := wal.Truncate(ctx, p.store, p.sim.layout, h.Check)
		p.sim.event("p%d: snapshot %d written, %d objects deleted (%v)", p.id, seq+1, n, err)
		p.sim.count("snapshots")
	}
}

// archive is the shared memory store with a record of every log batch
// that ever landed, whatever truncation deleted since: the history the
// checks replay from scratch. A log position written twice with
// different bytes (a batch re-created after truncation deleted it) is a
// broken invariant.
type archive struct {
	*mem.Store
	sim *sim

	mu      sync.Mutex
	batches map[uint64][]byte
}

func (a *archive) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	v, err := a.Store.PutIfAbsent(ctx, key, data)
	if err != nil {
		return v, err
	}
	if seq, ok := a.sim.layout.ParseLogKey(key); ok {
		a.mu.Lock()
		old, had := a.batches[seq]
		if !had {
			a.batches[seq] = bytes.Clone(data)
		}
		a.mu.Unlock()
		if had && !bytes.Equal(old, data) {
			b, _ := wal.Decode(key, data)
			ob, _ := wal.Decode(key, old)
			a.sim.fail("log position %d written twice: first a %s batch of epoch %d, then (after truncation deleted it) a %s batch of epoch %d",
				seq, ob.Kind, ob.Epoch, b.Kind, b.Epoch)
		}
	}
	return v, nil
}
