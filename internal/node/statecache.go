package node

import (
	"container/list"
	"sync"

	"github.com/dexzd/dexzd/internal/engine"
)

// cachedStore keeps the decoded committed state of recently written flows
// in memory in front of a Store, so that the hot path (the sequencer's
// load, applyBatch's read inside the transaction, WaitForFlow) clones a
// state instead of decoding it from the store's encoding.
//
// Only Apply fills the cache, after its transaction committed, with a copy
// of every state the transaction put: a read that missed the cache never
// inserts (it could race with a commit and insert an older state). Entries
// are never modified once inserted; every read returns a Clone, so callers
// own what they get as the Store contract says. The cache is bounded by
// entry count (least recently used evicted).
type cachedStore struct {
	Store
	c *stateCache
}

var _ Store = (*cachedStore)(nil)

// defaultStateCacheEntries bounds the flows kept decoded in memory.
const defaultStateCacheEntries = 4096

func newCachedStore(s Store, entries int) *cachedStore {
	return &cachedStore{Store: s, c: newStateCache(entries)}
}

// Apply implements Store: fn's puts enter the cache once committed.
func (s *cachedStore) Apply(seq uint64, fn func(tx StoreTx) error) error {
	tx := &cachedTx{c: s.c}
	err := s.Store.Apply(seq, func(inner StoreTx) error {
		tx.inner = inner
		defer func() { tx.inner = nil }()
		return fn(tx)
	})
	if err != nil {
		return err
	}
	for _, st := range tx.puts {
		s.c.put(st)
	}
	return nil
}

// Flow implements Store.
func (s *cachedStore) Flow(flowID string) (*engine.FlowState, error) {
	if st := s.c.get(flowID); st != nil {
		return st.Clone(), nil
	}
	return s.Store.Flow(flowID)
}

// Run implements Store.
func (s *cachedStore) Run(flowID, runID string) (*engine.FlowState, error) {
	if st := s.c.get(flowID); st != nil && st.RunID == runID {
		return st.Clone(), nil
	}
	return s.Store.Run(flowID, runID)
}

type cachedTx struct {
	c     *stateCache
	inner StoreTx
	puts  map[string]*engine.FlowState // by flow ID: the latest put
}

// Flow implements StoreTx. A flow this transaction already put is read
// from the transaction itself.
func (tx *cachedTx) Flow(flowID string) (*engine.FlowState, error) {
	if _, ok := tx.puts[flowID]; !ok {
		if st := tx.c.get(flowID); st != nil {
			return st.Clone(), nil
		}
	}
	return tx.inner.Flow(flowID)
}

// PutFlow implements StoreTx; the caller may change st afterwards, so the
// cache keeps a copy.
func (tx *cachedTx) PutFlow(st *engine.FlowState) error {
	if err := tx.inner.PutFlow(st); err != nil {
		return err
	}
	if tx.puts == nil {
		tx.puts = map[string]*engine.FlowState{}
	}
	tx.puts[st.FlowID] = st.Clone()
	return nil
}

// PutFlowType implements StoreTx.
func (tx *cachedTx) PutFlowType(flowType, flowID, runID string) error {
	return tx.inner.PutFlowType(flowType, flowID, runID)
}

// stateCache is an LRU of immutable committed states by flow ID.
type stateCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*list.Element
	lru list.List // front: most recently used; values are *engine.FlowState
}

func newStateCache(entries int) *stateCache {
	return &stateCache{max: max(entries, 1), m: map[string]*list.Element{}}
}

// get returns the cached state of flowID, or nil; the caller must not
// modify it.
func (c *stateCache) get(flowID string) *engine.FlowState {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[flowID]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*engine.FlowState)
}

// put makes st the cached state of its flow ID; st must not change
// afterwards.
func (c *stateCache) put(st *engine.FlowState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[st.FlowID]; ok {
		e.Value = st
		c.lru.MoveToFront(e)
		return
	}
	c.m[st.FlowID] = c.lru.PushFront(st)
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.m, old.Value.(*engine.FlowState).FlowID)
	}
}
