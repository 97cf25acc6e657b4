package flowstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/localstore"
)

// OpenLocal opens the Pebble local store in dir (package localstore)
// as a Store, with the decoded states of recently written flows cached in
// memory (cachedStore).
func OpenLocal(dir string, log *slog.Logger) (Store, error) {
	s, err := localstore.Open(dir, localstore.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return newCachedStore(pebbleStore{s}, defaultStateCacheEntries), nil
}

// RestoreLocal restores the Pebble local store in dir from a snapshot
// stream (localstore.Restore; dir must hold no store) and opens it as
// OpenLocal does.
func RestoreLocal(dir string, r io.Reader, log *slog.Logger) (Store, error) {
	s, err := localstore.Restore(dir, r, localstore.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return newCachedStore(pebbleStore{s}, defaultStateCacheEntries), nil
}

// WrapLocal is s as a Store, without the state cache.
func WrapLocal(s *localstore.Store) Store { return pebbleStore{s} }

// Checkpoint writes a snapshot of store to w (localstore.Checkpoint) and
// returns the applied sequence number it reflects; ok is false for a store
// that cannot write snapshots (the in-memory store of tests), and nothing
// is written.
func Checkpoint(store Store, w io.Writer) (seq uint64, ok bool, err error) {
	switch s := store.(type) {
	case *cachedStore:
		return Checkpoint(s.Store, w)
	case pebbleStore:
		seq, err := s.s.Checkpoint(w)
		return seq, true, err
	}
	return 0, false, nil
}

// pebbleStore adapts *localstore.Store: not found is (nil, nil) here.
type pebbleStore struct{ s *localstore.Store }

var _ Store = pebbleStore{}

func (p pebbleStore) Applied() (uint64, bool) { return p.s.Applied() }

func (p pebbleStore) Apply(seq uint64, fn func(tx Tx) error) error {
	return p.s.Apply(seq, func(tx *localstore.Tx) error { return fn(pebbleTx{tx}) })
}

func (p pebbleStore) Flow(flowID string) (*engine.FlowState, error) {
	return notFoundNil(p.s.Flow(flowID))
}

func (p pebbleStore) Run(flowID, runID string) (*engine.FlowState, error) {
	return notFoundNil(p.s.Run(flowID, runID))
}

func (p pebbleStore) ListFlows(q ListQuery) ([]engine.Summary, string, error) {
	out, next, err := p.s.ListFlows(localstore.ListQuery{FlowType: q.FlowType, Statuses: q.Statuses,
		StartFrom: q.From, StartTo: q.To, PageSize: q.PageSize, PageToken: q.PageToken})
	if errors.Is(err, localstore.ErrBadPageToken) {
		return nil, "", fmt.Errorf("%w: %w", ErrBadPageToken, err)
	}
	return out, next, err
}

func (p pebbleStore) RunningFlows(fn func(st *engine.FlowState) error) error {
	return p.s.RunningFlows(fn)
}

func (p pebbleStore) FlowTypes(fn func(flowType, flowID, runID string) error) error {
	return p.s.FlowTypes(fn)
}

func (p pebbleStore) Close() error { return p.s.Close() }

type pebbleTx struct{ tx *localstore.Tx }

func (t pebbleTx) Flow(flowID string) (*engine.FlowState, error) {
	return notFoundNil(t.tx.Flow(flowID))
}
func (t pebbleTx) PutFlow(st *engine.FlowState) error { return t.tx.PutFlow(st) }

func (t pebbleTx) PutFlowType(flowType, flowID, runID string) error {
	return t.tx.PutFlowType(flowType, flowID, runID)
}

func notFoundNil(st *engine.FlowState, err error) (*engine.FlowState, error) {
	if errors.Is(err, localstore.ErrNotFound) {
		return nil, nil
	}
	return st, err
}
