package serving

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// Long polls on a run's progress (E35): WaitForStepCompletion and
// WaitForAttribute. Each reads the run's committed state, checks its
// condition, and otherwise waits on the flow's progress channel, which
// OnDurable closes after every batch that touched the flow, then reads
// again. The channel is taken before the read, so a change between the
// read and the wait is not missed. A flow without such a poll costs one
// atomic load per batch (progressPolls).
//
// The polls count against the same bound as WaitForFlow
// (limits.maxFlowWaiters): a poll that would wait beyond it is refused
// with RESOURCE_EXHAUSTED and a retry hint, one whose condition holds
// already is answered. The run is pinned at the first read (the latest
// one when the call names none). A run that closes without meeting the
// condition can no longer meet it: FAILED_PRECONDITION. The server's
// long-poll cap ends a wait with DEADLINE_EXCEEDED and the SDK polls
// again, also on another process after a failover: the condition is
// read from the run's state, which the new active has.

var _ server.ProgressBackend = (*Core)(nil)

// wakeProgress wakes the polls on the flows of an applied batch.
func (c *Core) wakeProgress(a applied) {
	for flowID := range a.states {
		c.progress.wake(flowID)
	}
}

// waitProgress waits until met holds for the run's committed state, or the
// run closes (met false: the caller tells), and returns that state.
func (c *Core) waitProgress(ctx context.Context, flowID, runID string, met func(*engine.FlowState) (bool, error)) (*engine.FlowState, bool, error) {
	counted := false
	defer func() {
		if counted {
			c.waiters.leave()
			c.progressPolls.Add(-1)
		}
	}()
	for {
		ch := c.progress.acquire(flowID)
		st, err := c.flow(flowID, runID)
		ok := false
		if err == nil {
			ok, err = met(st)
		}
		if err == nil && !ok && st.Running() && !counted {
			if counted = c.waiters.enter(); !counted {
				err = &server.OverloadError{Limit: "limits.maxFlowWaiters", RetryAfter: retryWaiters, Message: fmt.Sprintf(
					"%d long polls wait already, the most one server holds", c.waiters.limit())}
				c.refused(err)
			} else {
				c.progressPolls.Add(1)
			}
		}
		if err != nil {
			c.progress.release(flowID, ch)
			return nil, false, err
		}
		runID = st.RunID
		if ok || !st.Running() {
			c.progress.release(flowID, ch)
			return st, ok, nil
		}
		select {
		case <-ch:
			c.progress.release(flowID, ch)
		case <-ctx.Done():
			c.progress.release(flowID, ch)
			return nil, false, ctx.Err()
		case <-c.stopping:
			c.progress.release(flowID, ch)
			return nil, false, server.ErrNotServing
		}
	}
}

// encoding returns the encoding part of a value's type ("json" of
// "json:flows.Order").
func encoding(typ string) string {
	enc, _, _ := strings.Cut(typ, ":")
	return enc
}

// Finished returns the number of executions of step type typ that have
// finished in st: created (StepCounters) minus active. A closed run has
// none active: its executions count as cancelled.
func finished(st *engine.FlowState, typ string) int {
	n := st.StepCounters[typ]
	for _, s := range st.Steps {
		if s.Type == typ {
			n--
		}
	}
	return n
}

// WaitForStepCompletion implements server.ProgressBackend (E35).
func (c *Core) WaitForStepCompletion(ctx context.Context, flowID, runID, stepType string, count int) (*engine.FlowState, int, error) {
	st, ok, err := c.waitProgress(ctx, flowID, runID, func(st *engine.FlowState) (bool, error) {
		return finished(st, stepType) >= count, nil
	})
	if err != nil {
		return nil, 0, err
	}
	n := finished(st, stepType)
	if !ok {
		return nil, 0, &engine.Error{Code: engine.CodeFailedPrecondition, Reason: engine.ErrFlowClosed, Message: fmt.Sprintf(
			"flow %q run %s closed (%s) with %d of %d executions of step type %q finished", flowID, st.RunID, st.Status, n, count, stepType)}
	}
	return st, n, nil
}

// WaitForAttribute implements server.ProgressBackend (E35). Values are
// equal when their encodings and bytes are: the type name is not compared
// (another program may name the same shape differently, and the server
// never checks type names). A value kept as a value object is compared
// with its bytes, read when its encoding and size match.
func (c *Core) WaitForAttribute(ctx context.Context, flowID, runID, name string, equals *engine.Value) (*engine.FlowState, engine.Value, error) {
	var got engine.Value
	st, ok, err := c.waitProgress(ctx, flowID, runID, func(st *engine.FlowState) (bool, error) {
		v, ok := st.Attributes[name]
		if !ok {
			return false, nil
		}
		if equals != nil && (encoding(v.Type) != encoding(equals.Type) || v.Len() != len(equals.Data)) {
			return false, nil
		}
		v, err := resolve(ctx, c, v)
		if err != nil {
			return false, fmt.Errorf("%w: flow %q attribute %q: %w", server.ErrNotServing, flowID, name, err)
		}
		got = v
		return equals == nil || bytes.Equal(v.Data, equals.Data), nil
	})
	if err != nil {
		return nil, engine.Value{}, err
	}
	if !ok {
		return nil, engine.Value{}, &engine.Error{Code: engine.CodeFailedPrecondition, Reason: engine.ErrFlowClosed, Message: fmt.Sprintf(
			"flow %q run %s closed (%s) and attribute %q does not meet the condition", flowID, st.RunID, st.Status, name)}
	}
	return st, got, nil
}
