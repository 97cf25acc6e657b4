package node

import (
	"context"
	"sync"

	"github.com/dexzd/dexzd/internal/engine"
)

// WaitForFlow implements server.Backend (E25).
func (c *Core) WaitForFlow(ctx context.Context, flowID, runID string) (*engine.FlowState, error) {
	for {
		ch := c.waiters.ch(flowID)
		st, err := c.Flow(ctx, flowID, runID)
		if err != nil {
			return nil, err
		}
		runID = st.RunID // wait for the latest run as of the call
		if !st.Running() {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.stopping:
			return nil, ErrNotServing
		}
	}
}

// waiters wakes WaitForFlow calls when a run closes.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// ch returns the channel closed at the flow's next close.
func (w *waiters) ch(flowID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.m[flowID]
	if !ok {
		ch = make(chan struct{})
		w.m[flowID] = ch
	}
	return ch
}

func (w *waiters) wake(flowID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.m[flowID]; ok {
		close(ch)
		delete(w.m, flowID)
	}
}
