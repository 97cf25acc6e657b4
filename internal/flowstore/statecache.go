package flowstore

import (
	"container/list"
	"sync"

	"github.com/dexzd/dexzd/internal/engine"
)

// cachedStore keeps the decoded committed state of recently written flows
// in memory in front of a Store, so that the serving core's hot path (the
// sequencer's load, applyBatch's read inside the transaction, WaitForFlow)
// clones a state instead of decoding it from the store's encoding.
//
// Only Apply fills the cache, after its transaction committed, with a copy
// of every state the transaction put: a read that missed the cache never
// inserts (it could race with a commit and insert an older state). Entries
// are never modified once inserted; every read returns a Clone, so callers
// own what they get as the Store contract says. The cache is bounded by
// entry count and by bytes (least recently used evicted), and does not
// keep a state too large for its budget (see stateCache).
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
func (s *cachedStore) Apply(seq uint64, fn func(tx Tx) error) error {
	tx := &cachedTx{c: s.c}
	err := s.Store.Apply(seq, func(inner Tx) error {
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
	inner Tx
	puts  map[string]*engine.FlowState // by flow ID: the latest put
}

// Flow implements Tx. A flow this transaction already put is read
// from the transaction itself.
func (tx *cachedTx) Flow(flowID string) (*engine.FlowState, error) {
	if _, ok := tx.puts[flowID]; !ok {
		if st := tx.c.get(flowID); st != nil {
			return st.Clone(), nil
		}
	}
	return tx.inner.Flow(flowID)
}

// PutFlow implements Tx; the caller may change st afterwards, so the
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

// PutFlowType implements Tx.
func (tx *cachedTx) PutFlowType(flowType, flowID, runID string) error {
	return tx.inner.PutFlowType(flowType, flowID, runID)
}

// stateCache is an LRU of immutable committed states by flow ID, bounded
// by entry count and by the estimated memory of its states
// (engine.FlowState.MemoryBytes plus engine.HistoryMemoryBytes; issue 11).
// A state above a quarter of the byte budget is not cached at all (and
// replaces, by removing it, any older cached state of its flow): a flow
// that holds large values is read from the local store on each use, so
// large values live in the store and the log, not in the cache. With
// maxBytes B the cache keeps at most B bytes of states, whatever their
// number.
type stateCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int
	bytes    int // estimated memory of the cached states
	m        map[string]*list.Element
	lru      list.List // front: most recently used; values are *cacheEntry
}

// cacheEntry is a cached state and its memory estimate; hist and histBytes
// are how many history events the estimate counted and their part of it
// (events never change, so a later state of the run adds only its new
// ones).
type cacheEntry struct {
	st        *engine.FlowState
	bytes     int
	hist      int
	histBytes int
}

// defaultStateCacheBytes is the state cache's byte budget until
// setMaxBytes (limits.stateCacheBytes).
const defaultStateCacheBytes = 128 << 20

func newStateCache(entries int) *stateCache {
	return &stateCache{max: max(entries, 1), maxBytes: defaultStateCacheBytes, m: map[string]*list.Element{}}
}

// setMaxBytes sets the byte budget and evicts down to it.
func (c *stateCache) setMaxBytes(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxBytes = max(n, 1)
	c.evict()
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
	return e.Value.(*cacheEntry).st
}

// put makes st the cached state of its flow ID; st must not change
// afterwards. A state too large to cache removes the flow's entry.
func (c *stateCache) put(st *engine.FlowState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[st.FlowID]
	var prev *cacheEntry
	if ok {
		prev = e.Value.(*cacheEntry)
	}
	ent := &cacheEntry{st: st, hist: len(st.History)}
	if prev != nil && prev.st.RunID == st.RunID && prev.hist > 0 && prev.hist <= len(st.History) &&
		prev.st.History[0] == st.History[0] && prev.st.History[prev.hist-1] == st.History[prev.hist-1] {
		ent.histBytes = prev.histBytes + engine.HistoryMemoryBytes(st.History[prev.hist:])
	} else {
		ent.histBytes = engine.HistoryMemoryBytes(st.History)
	}
	ent.bytes = st.MemoryBytes() + ent.histBytes
	if ok {
		c.remove(e)
	}
	if ent.bytes > c.maxBytes/4 {
		return
	}
	c.m[st.FlowID] = c.lru.PushFront(ent)
	c.bytes += ent.bytes
	c.evict()
}

func (c *stateCache) remove(e *list.Element) {
	ent := e.Value.(*cacheEntry)
	c.lru.Remove(e)
	delete(c.m, ent.st.FlowID)
	c.bytes -= ent.bytes
}

// evict drops the least recently used states until both bounds hold.
func (c *stateCache) evict() {
	for c.lru.Len() > 0 && (c.lru.Len() > c.max || c.bytes > c.maxBytes) {
		c.remove(c.lru.Back())
	}
}

// size returns the number of cached states and their estimated bytes.
func (c *stateCache) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

// LimitStateCache sets the byte budget of store's state cache
// (limits.stateCacheBytes), if it has one; 0 keeps the default.
func LimitStateCache(store Store, bytes int) {
	if cs, ok := store.(*cachedStore); ok && bytes > 0 {
		cs.c.setMaxBytes(bytes)
	}
}
