package serving

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// maxFlowWaiters is the default bound (limits.maxFlowWaiters,
// AdmissionLimits.MaxFlowWaiters) of the WaitForFlow calls that wait at
// once in one process (E25). A call beyond it that would have to wait is refused at
// once with a *server.OverloadError (RESOURCE_EXHAUSTED with a retry hint
// of retryWaiters, which the SDK waits and sends the call again on); one
// on a closed or unknown flow is answered as always, since it does not
// wait. Every waiting call holds a goroutine, a stream and, with its flow,
// an entry here: the bound keeps that memory fixed however many clients
// poll. 10,000 is more than half the streams one connection may open
// (limits.maxConcurrentStreams).
const maxFlowWaiters = 10_000

// retryWaiters is the retry hint of a WaitForFlow refused at the bound:
// waiters leave as flows close and as long polls expire.
const retryWaiters = time.Second

// WaitForFlow implements server.Backend (E25). A call that names no run
// waits for the latest run as of the call and follows its flow retries
// (E34), continuations and resets (E37): a failed run that the flow retry
// policy retried, a run that continued as new, or a run a reset closed,
// is not the end of the flow, so the call waits for the next run, and so
// on. A call that names a run answers that run's close. The state has the
// bytes of its outputs' value objects only (withOutputValues).
func (c *Core) WaitForFlow(ctx context.Context, flowID, runID string) (*engine.FlowState, error) {
	follow := runID == ""
	counted := false
	defer func() {
		if counted {
			c.waiters.leave()
		}
	}()
	for {
		// Registered before the read, so that a close between the read
		// and the wait is not missed; released on every way out, so that
		// a call on a closed or unknown flow leaves no entry behind.
		ch := c.waiters.acquire(flowID)
		st, err := c.flow(flowID, runID)
		if err == nil && st.Running() && !counted {
			if counted = c.waiters.enter(); !counted {
				err = &server.OverloadError{Limit: "limits.maxFlowWaiters", RetryAfter: retryWaiters, Message: fmt.Sprintf(
					"%d WaitForFlow calls wait already, the most one server holds", c.waiters.limit())}
				c.refused(err)
			}
		}
		if err != nil {
			c.waiters.release(flowID, ch)
			return nil, err
		}
		runID = st.RunID // wait for the latest run as of the call
		if !st.Running() && follow && st.NextRunID() != "" {
			c.waiters.release(flowID, ch)
			runID = st.NextRunID() // E34 retry, E37 continuation or reset: in the same batch
			continue
		}
		if !st.Running() {
			c.waiters.release(flowID, ch)
			return c.withOutputValues(ctx, st)
		}
		select {
		case <-ch:
			c.waiters.release(flowID, ch)
		case <-ctx.Done():
			c.waiters.release(flowID, ch)
			return nil, ctx.Err()
		case <-c.stopping:
			c.waiters.release(flowID, ch)
			return nil, server.ErrNotServing
		}
	}
}

// waiters wakes WaitForFlow calls when a run closes. A flow has a channel
// while a call holds it (refs counts the holders of each channel); the
// last holder to leave removes it, and a close removes it at once (the
// holders see it closed and leave later).
type waiters struct {
	mu      sync.Mutex
	m       map[string]chan struct{} // by flow: closed at its next close
	refs    map[chan struct{}]int    // calls holding each channel
	waiting int                      // calls counted by enter
	max     int                      // 0: maxFlowWaiters
}

// acquire returns the channel closed at flowID's next close, held until
// release.
func (w *waiters) acquire(flowID string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]chan struct{}{}
	}
	if w.refs == nil {
		w.refs = map[chan struct{}]int{}
	}
	ch, ok := w.m[flowID]
	if !ok {
		ch = make(chan struct{})
		w.m[flowID] = ch
	}
	w.refs[ch]++
	return ch
}

// release gives back a channel acquire returned; the last holder removes
// flowID's entry unless a close removed it already.
func (w *waiters) release(flowID string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refs[ch]--; w.refs[ch] > 0 {
		return
	}
	delete(w.refs, ch)
	if w.m[flowID] == ch {
		delete(w.m, flowID)
	}
}

// wake closes flowID's channel and removes its entry.
func (w *waiters) wake(flowID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.m[flowID]; ok {
		close(ch)
		delete(w.m, flowID)
	}
}

// enter counts a call that is about to wait; false when the limit is
// reached (nothing counted then).
func (w *waiters) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting >= w.limit() {
		return false
	}
	w.waiting++
	return true
}

// leave uncounts a call enter counted.
func (w *waiters) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting--
}

func (w *waiters) limit() int {
	if w.max > 0 {
		return w.max
	}
	return maxFlowWaiters
}

// len returns the number of flow entries and of channels still held.
func (w *waiters) len() (flows, held int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m), len(w.refs)
}
