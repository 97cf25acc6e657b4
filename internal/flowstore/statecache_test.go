package flowstore

import (
	"fmt"
	"testing"

	"github.com/dexzd/dexzd/internal/engine"
)

// bigState is a committed state of flowID whose history holds n values of
// size bytes each, as n attribute writes of the same run would leave.
func bigState(flowID string, n, size int) *engine.FlowState {
	st := &engine.FlowState{FlowID: flowID, RunID: "r1", Status: engine.StatusRunning,
		Attributes: map[string]engine.Value{"a": {Data: make([]byte, size)}}}
	for i := range n {
		st.History = append(st.History, &engine.HistoryEvent{ID: i + 1, Type: engine.EventAttributesSet,
			Attributes: []engine.AttributeWrite{{Name: "a", Value: engine.Value{Data: make([]byte, size)}}}})
	}
	return st
}

// The state cache is bounded by bytes, not only by count (issue 11): many
// flows with large values never hold more than the budget, a state above a
// quarter of it is not cached and drops the older cached state of its flow
// (never a stale read), and a state that grows by appended history is
// estimated from its new events.
//
// Covers: E28
func TestStateCache_BoundedByBytes(t *testing.T) {
	t.Parallel()
	const budget = 64 << 20
	c := newStateCache(defaultStateCacheEntries)
	c.setMaxBytes(budget)
	for i := range 100 { // 100 flows of ~4 MiB: 400 MiB without the bound
		c.put(bigState(fmt.Sprintf("f%d", i), 0, 4<<20))
		if _, b := c.size(); b > budget {
			t.Fatalf("after %d puts the cache holds %d bytes, above its budget %d", i+1, b, budget)
		}
	}
	if n, b := c.size(); n == 0 || n > 16 || b < 4<<20 {
		t.Fatalf("cache holds %d states, %d bytes; want a few of the most recent", n, b)
	}
	if c.get("f99") == nil || c.get("f0") != nil {
		t.Fatal("the most recent state must be cached and the oldest evicted")
	}

	small := bigState("big", 1, 1<<20)
	c.put(small)
	if c.get("big") != small {
		t.Fatal("a small state of flow big is not cached")
	}
	c.put(bigState("big", 5, 4<<20)) // ~24 MiB > budget/4
	if c.get("big") != nil {
		t.Fatal("a state above a quarter of the budget is cached, or its flow's older state is still served")
	}

	// History grows by appended events, shared between the states of a run.
	c2 := newStateCache(10)
	st := bigState("g", 2, 1<<20)
	c2.put(st)
	_, b1 := c2.size()
	next := st.Clone()
	next.History = append(next.History, &engine.HistoryEvent{ID: 3, Type: engine.EventAttributesSet,
		Attributes: []engine.AttributeWrite{{Name: "a", Value: engine.Value{Data: make([]byte, 1<<20)}}}})
	c2.put(next)
	_, b2 := c2.size()
	want := next.MemoryBytes() + engine.HistoryMemoryBytes(next.History)
	if b2 != want || b2-b1 < 1<<20 {
		t.Fatalf("estimate after an appended event = %d (was %d), want %d", b2, b1, want)
	}
}
