package dex

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Long polls on a flow's progress (E35).

// WaitForStepCompletion waits until at least count executions of step
// type step have finished in the flow's latest run (or WithRunID's):
// completed, ended by a recovery step, or cancelled (a closed run's active
// executions count as cancelled). It returns the number finished so far.
// count below 1 means 1.
//
//	n, err := c.WaitForStepCompletion(ctx, "order-42", dex.Ref[Ship](), 1)
//
// Like WaitForFlow it polls again whenever the server's long poll expires
// and repeats the call on another address after a failover, until ctx
// ends. A run that closed with fewer finished executions is an error
// matching ErrFailedPrecondition.
func (c *Client) WaitForStepCompletion(ctx context.Context, flowID string, step StepRef, count int, opts ...CallOption) (int, error) {
	o := applyCall(opts)
	req := &dexpb.WaitForStepCompletionRequest{FlowId: flowID, RunId: o.runID, StepType: step.name, Count: uint32(max(count, 1))}
	var resp *dexpb.WaitForStepCompletionResponse
	err := c.longPoll(ctx, "WaitForStepCompletion", flowID, func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.WaitForStepCompletion(ctx, req)
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(resp.GetFinished()), nil
}

// AttributeCondition is what WaitForAttribute waits for: Exists or
// Equals.
type AttributeCondition[T any] struct {
	equals *T
}

// Exists is met once the attribute has a value.
func Exists[T any]() AttributeCondition[T] { return AttributeCondition[T]{} }

// Equals is met once the attribute's value equals v. The server compares
// the encoded values (encoding and JSON bytes), so it needs a Codec that
// encodes a value the same way every time: with NewAESGCMCodec, whose
// output is random, wait with Exists on an attribute the flow sets only
// when the value is reached.
func Equals[T any](v T) AttributeCondition[T] { return AttributeCondition[T]{equals: &v} }

// WaitForAttribute waits until attribute a of the flow's latest run (or
// WithRunID's) meets cond, and returns its value:
//
//	v, err := dex.WaitForAttribute(ctx, c, "order-42", Status, dex.Equals("shipped"))
//
// Like WaitForFlow it polls again whenever the server's long poll expires
// and repeats the call after a failover, until ctx ends. A run that closed
// without meeting the condition is an error matching
// ErrFailedPrecondition.
func WaitForAttribute[T any](ctx context.Context, c *Client, flowID string, a Attribute[T], cond AttributeCondition[T], opts ...CallOption) (T, error) {
	var zero T
	o := applyCall(opts)
	req := &dexpb.WaitForAttributeRequest{FlowId: flowID, RunId: o.runID, Name: a.name}
	if cond.equals != nil {
		ev, err := encodeValue(*cond.equals)
		if err != nil {
			return zero, fmt.Errorf("dex: WaitForAttribute %q: %w", a.name, err)
		}
		req.Condition = &dexpb.WaitForAttributeRequest_Equals{Equals: ev}
	} else {
		req.Condition = &dexpb.WaitForAttributeRequest_Exists{Exists: true}
	}
	var resp *dexpb.WaitForAttributeResponse
	err := c.longPoll(ctx, "WaitForAttribute", flowID, func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.WaitForAttribute(ctx, req)
		return err
	})
	if err != nil {
		return zero, err
	}
	v, err := decodeValue[T](resp.GetValue())
	if err != nil {
		return zero, fmt.Errorf("dex: WaitForAttribute %q: %w", a.name, err)
	}
	return v, nil
}

// longPoll runs a long poll as WaitForFlow does: retried on UNAVAILABLE
// (another address, a failover), sent again whenever the server's poll
// expired (DEADLINE_EXCEEDED) until ctx ends.
func (c *Client) longPoll(ctx context.Context, op, flowID string, fn func(ctx context.Context, fc dexpb.FlowServiceClient) error) error {
	for {
		err := c.call(ctx, op, flowID, retryable, "", fn)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctxError(ctx, op, nil)
		}
		if status.Code(err) != codes.DeadlineExceeded {
			return err
		}
	}
}
