package flowstore

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// MemStore is an in-memory Store for tests: it keeps every run encoded (so
// callers never share state with it) and forgets everything on Close. A node
// on a MemStore replays the whole log at every start.
type MemStore struct {
	mu      sync.RWMutex
	applied uint64
	ok      bool
	latest  map[string]string            // flow ID -> latest run ID
	runs    map[string]map[string][]byte // flow ID -> run ID -> encoded state
	types   map[string][2]string         // flow type -> flow ID, run ID of its latest declaration
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{latest: map[string]string{}, runs: map[string]map[string][]byte{}, types: map[string][2]string{}}
}

// Applied implements Store.
func (m *MemStore) Applied() (uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.applied, m.ok
}

type memTx struct {
	m      *MemStore
	latest map[string]string
	puts   map[string]map[string][]byte
	types  map[string][2]string
}

func (tx *memTx) Flow(flowID string) (*engine.FlowState, error) {
	runID, ok := tx.latest[flowID]
	if !ok {
		runID, ok = tx.m.latest[flowID]
	}
	if !ok {
		return nil, nil
	}
	if b, ok := tx.puts[flowID][runID]; ok {
		return engine.UnmarshalState(b)
	}
	return engine.UnmarshalState(tx.m.runs[flowID][runID])
}

func (tx *memTx) PutFlow(st *engine.FlowState) error {
	b, err := engine.MarshalState(st)
	if err != nil {
		return err
	}
	if tx.puts[st.FlowID] == nil {
		tx.puts[st.FlowID] = map[string][]byte{}
	}
	tx.puts[st.FlowID][st.RunID] = b
	tx.latest[st.FlowID] = st.RunID
	return nil
}

func (tx *memTx) PutFlowType(flowType, flowID, runID string) error {
	tx.types[flowType] = [2]string{flowID, runID}
	return nil
}

// Apply implements Store.
func (m *MemStore) Apply(seq uint64, fn func(tx Tx) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ok && seq <= m.applied {
		return fmt.Errorf("apply batch %d: the store has applied %d already", seq, m.applied)
	}
	tx := &memTx{m: m, latest: map[string]string{}, puts: map[string]map[string][]byte{}, types: map[string][2]string{}}
	if err := fn(tx); err != nil {
		return err
	}
	for flowID, runs := range tx.puts {
		if m.runs[flowID] == nil {
			m.runs[flowID] = map[string][]byte{}
		}
		for runID, b := range runs {
			m.runs[flowID][runID] = b
		}
	}
	for flowID, runID := range tx.latest {
		m.latest[flowID] = runID
	}
	for typ, ids := range tx.types {
		m.types[typ] = ids
	}
	m.applied, m.ok = seq, true
	return nil
}

// Flow implements Store.
func (m *MemStore) Flow(flowID string) (*engine.FlowState, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	runID, ok := m.latest[flowID]
	if !ok {
		return nil, nil
	}
	return engine.UnmarshalState(m.runs[flowID][runID])
}

// Run implements Store.
func (m *MemStore) Run(flowID, runID string) (*engine.FlowState, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.runs[flowID][runID]
	if !ok {
		return nil, nil
	}
	return engine.UnmarshalState(b)
}

// EncodedRuns returns every run the store holds, encoded
// (engine.MarshalState, as stored: the caller must not change the bytes),
// by flow ID and run ID, and each flow's latest run ID: for tests that
// compare stores without decoding every run.
func (m *MemStore) EncodedRuns() (runs map[string]map[string][]byte, latest map[string]string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	runs = make(map[string]map[string][]byte, len(m.runs))
	for id, rs := range m.runs {
		runs[id] = maps.Clone(rs)
	}
	return runs, maps.Clone(m.latest)
}

// FlowTypes implements Store.
func (m *MemStore) FlowTypes(fn func(flowType, flowID, runID string) error) error {
	m.mu.RLock()
	types := make([]string, 0, len(m.types))
	for typ := range m.types {
		types = append(types, typ)
	}
	ids := maps.Clone(m.types)
	m.mu.RUnlock()
	slices.Sort(types)
	for _, typ := range types {
		if err := fn(typ, ids[typ][0], ids[typ][1]); err != nil {
			return err
		}
	}
	return nil
}

// RunningFlows implements Store.
func (m *MemStore) RunningFlows(fn func(st *engine.FlowState) error) error {
	m.mu.RLock()
	var states []*engine.FlowState
	for flowID, runID := range m.latest {
		st, err := engine.UnmarshalState(m.runs[flowID][runID])
		if err != nil {
			m.mu.RUnlock()
			return err
		}
		if st.Running() {
			states = append(states, st)
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(states, func(a, b *engine.FlowState) int { return cmp.Compare(a.FlowID, b.FlowID) })
	for _, st := range states {
		if err := fn(st); err != nil {
			return err
		}
	}
	return nil
}

// listCursor is MemStore's page token: the filter's hash and the last
// summary returned.
type listCursor struct {
	Filter    uint64    `json:"f"`
	StartedAt time.Time `json:"t"`
	FlowID    string    `json:"i"`
	RunID     string    `json:"r"`
}

func filterHash(q ListQuery) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%q|%v|%d|%d", q.FlowType, q.Statuses, q.From.UnixNano(), q.To.UnixNano())
	return h.Sum64()
}

// newestFirst orders summaries by start time, newest first, then by flow
// and run ID.
func newestFirst(a, b engine.Summary) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	if c := cmp.Compare(a.FlowID, b.FlowID); c != 0 {
		return c
	}
	return cmp.Compare(a.RunID, b.RunID)
}

// ListFlows implements Store.
func (m *MemStore) ListFlows(q ListQuery) ([]engine.Summary, string, error) {
	var after *listCursor
	if q.PageToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		var c listCursor
		if err == nil {
			err = json.Unmarshal(raw, &c)
		}
		if err != nil || c.Filter != filterHash(q) {
			return nil, "", ErrBadPageToken
		}
		after = &c
	}
	size := q.PageSize
	if size <= 0 {
		size = 100
	}
	m.mu.RLock()
	var all []engine.Summary
	for _, runs := range m.runs {
		for _, b := range runs {
			st, err := engine.UnmarshalState(b)
			if err != nil {
				m.mu.RUnlock()
				return nil, "", err
			}
			all = append(all, st.Summary())
		}
	}
	m.mu.RUnlock()
	var out []engine.Summary
	for _, s := range all {
		if matches(q, s) && (after == nil || newestFirst(engine.Summary{StartedAt: after.StartedAt, FlowID: after.FlowID, RunID: after.RunID}, s) < 0) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, newestFirst)
	if len(out) <= size {
		return out, "", nil
	}
	out = out[:size]
	last := out[size-1]
	raw, _ := json.Marshal(listCursor{Filter: filterHash(q), StartedAt: last.StartedAt, FlowID: last.FlowID, RunID: last.RunID})
	return out, base64.RawURLEncoding.EncodeToString(raw), nil
}

func matches(q ListQuery, s engine.Summary) bool {
	switch {
	case q.FlowType != "" && s.FlowType != q.FlowType:
		return false
	case len(q.Statuses) > 0 && !slices.Contains(q.Statuses, s.Status):
		return false
	case !q.From.IsZero() && s.StartedAt.Before(q.From):
		return false
	case !q.To.IsZero() && !s.StartedAt.Before(q.To):
		return false
	}
	return true
}

// Close implements Store.
func (m *MemStore) Close() error { return nil }
