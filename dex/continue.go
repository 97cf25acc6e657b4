package dex

import (
	"context"
	"errors"
	"fmt"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Continue-as-new (E37): a long-lived flow keeps its history bounded by
// continuing as a new run of the same flow ID. The server does it by
// itself when a run's history reaches limits.continueAsNewHistoryEvents;
// a step asks for it with ContinueAsNew, a client with
// Client.ContinueAsNew. The new run (ID "<first run>.continued-<n>")
// takes over every queued and waiting step execution with its wait and
// satisfied conditions, the unconsumed messages, the attributes, the
// outputs so far, the step counters (execution IDs go on) and the flow
// timeout's deadline; attempts running at the switch deliver their
// results to it. The old run closes StatusContinuedAsNew with
// FlowState.ContinuedRunID naming the new one. WaitForFlow and the reads
// by flow ID follow to the latest run.

// ContinueAsNew returns decision d (a Move or DeadEnd) with a request to
// continue the flow as a new run once d commits:
//
//	return dex.ContinueAsNew(dex.Move(dex.To[Month](next))), nil
//
// d's movements are created first and carried with everything else.
func ContinueAsNew(d Decision) Decision { return continueDecision{d: d} }

type continueDecision struct{ d Decision }

func (c continueDecision) movements() []Movement {
	if c.d == nil {
		return nil
	}
	return c.d.movements()
}

func (c continueDecision) cancels() []Cancel { return cancelsOf(c.d) }

func (c continueDecision) decisionProto() (*dexpb.StepDecision, error) {
	if c.d == nil {
		return nil, errors.New("dex.ContinueAsNew of a nil Decision")
	}
	pd, err := c.d.decisionProto()
	if err != nil {
		return nil, err
	}
	switch pd.GetDecision().(type) {
	case *dexpb.StepDecision_Movements, *dexpb.StepDecision_DeadEnd:
	default:
		return nil, fmt.Errorf("dex.ContinueAsNew goes with dex.Move or dex.DeadEnd, not %T", pd.GetDecision())
	}
	pd.ContinueAsNew = true
	return pd, nil
}

// ContinueOption adjusts Client.ContinueAsNew: WithRequestID.
type ContinueOption interface{ applyContinue(*continueOptions) }

type continueOptions struct{ requestID string }

// ContinueAsNew continues the flow's run runID (required: the latest run,
// as FlowState.Summary.RunID shows it) as a new run now, recording reason
// in the old run's close message, and returns the new run's ID. A run that
// is no longer the latest is a NOT_FOUND error; a closed one
// FAILED_PRECONDITION.
//
// It is idempotent by request ID, like StartFlow and Reset: each call has
// its own (or the one WithRequestID gives), reused when it retries after
// UNAVAILABLE or a lost reply, and a ContinueAsNew of runID that was
// already applied with that request ID returns its new run instead of
// continuing again. With WithRequestID("") it is sent at most once.
func (c *Client) ContinueAsNew(ctx context.Context, flowID, runID, reason string, opts ...ContinueOption) (string, error) {
	o := continueOptions{requestID: NewRequestID()}
	for _, opt := range opts {
		opt.applyContinue(&o)
	}
	kind := retryable
	if o.requestID == "" {
		kind = once
	}
	req := &dexpb.ContinueAsNewRequest{FlowId: flowID, RunId: runID, Reason: reason, RequestId: o.requestID}
	var resp *dexpb.ContinueAsNewResponse
	err := c.call(ctx, "ContinueAsNew", flowID, kind, o.requestID, func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.ContinueAsNew(ctx, req)
		return err
	})
	return resp.GetNewRunId(), err
}
