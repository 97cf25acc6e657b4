package dex

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// ResetPoint is where Client.Reset starts the new run: one of
// ResetToBeginning, ResetToStepType, ResetToStepExecution,
// ResetToExecute and ResetToTime (E37).
type ResetPoint struct{ p *dexpb.ResetPoint }

// ResetToBeginning is the run's start, before its start step's first
// attempt.
func ResetToBeginning() ResetPoint {
	return ResetPoint{&dexpb.ResetPoint{Point: &dexpb.ResetPoint_Beginning{Beginning: true}}}
}

// ResetToStepType is the point before the first execution of a step
// type: dex.ResetToStepType(dex.Ref[Charge]()).
func ResetToStepType(step StepRef) ResetPoint {
	return ResetPoint{&dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepType{StepType: step.Name()}}}
}

// ResetToStepExecution is the point before a step execution's WaitFor
// ("Charge-2": the execution starts again with its ID and input).
func ResetToStepExecution(stepExecutionID string) ResetPoint {
	return ResetPoint{&dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepExecution{
		StepExecution: &dexpb.StepExecutionPoint{StepExecutionId: stepExecutionID}}}}
}

// ResetToExecute is the point before a step execution's Execute, once
// its WaitFor completed: the WaitFor does not run again. Its WaitFor must
// have returned no wait or a wait of timers only (the history keeps a
// wait, not the messages it took).
func ResetToExecute(stepExecutionID string) ResetPoint {
	return ResetPoint{&dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepExecution{
		StepExecution: &dexpb.StepExecutionPoint{StepExecutionId: stepExecutionID, BeforeExecute: true}}}}
}

// ResetToTime is the last eligible point at or before t: the beginning,
// or just after an event that created step executions.
func ResetToTime(t time.Time) ResetPoint {
	return ResetPoint{&dexpb.ResetPoint{Point: &dexpb.ResetPoint_EventTime{EventTime: timestamppb.New(t)}}}
}

// ResetOption adjusts Client.Reset.
type ResetOption interface{ applyReset(*resetOptions) }

type resetOptions struct {
	reason    string
	skip      bool
	requestID string
}

type resetFunc func(*resetOptions)

func (f resetFunc) applyReset(o *resetOptions) { f(o) }

// WithResetReason records why the run was reset: in the new run's
// FlowStarted event and in the close message of a running run.
func WithResetReason(reason string) ResetOption {
	return resetFunc(func(o *resetOptions) { o.reason = reason })
}

// SkipReapply leaves out the client writes made after the point
// (SetAttributes, Publish, the writes of RPCs), which Reset by default
// re-applies to the new run in their order.
func SkipReapply() ResetOption { return resetFunc(func(o *resetOptions) { o.skip = true }) }

// Reset makes a new run of flowID from a point of its run runID, which
// must be the flow ID's latest, and returns the new run's ID (E37):
//
//	newRun, err := c.Reset(ctx, "order-42", run.RunID, dex.ResetToStepType(dex.Ref[Charge]()),
//		dex.WithResetReason("charge bug fixed in v2"))
//
// The new run starts with the state at the point: the attributes as they
// were, the step executions active then (each again from its WaitFor,
// with its ID and input), the messages published before it that the run
// had not consumed. The reset run keeps its history; a running one is
// TERMINATED with a message naming the new run. WaitForFlow without
// WithRunID follows to the new run. A run ID that is not the latest, or a
// point the run's history does not have, is FAILED_PRECONDITION naming
// the field.
//
// Reset is idempotent by request ID, like StartFlow: each call has its own
// (or the one WithRequestID gives), reused when it retries after
// UNAVAILABLE or a lost reply, and a reset of runID that was already
// applied with that request ID returns its new run instead of resetting
// again. To retry by hand after an *OutcomeUnknownError, pass its
// RequestID with WithRequestID and the same runID. With
// WithRequestID("") the call carries none and is sent at most once.
func (c *Client) Reset(ctx context.Context, flowID, runID string, point ResetPoint, opts ...ResetOption) (string, error) {
	o := resetOptions{requestID: NewRequestID()}
	for _, opt := range opts {
		opt.applyReset(&o)
	}
	req := &dexpb.ResetFlowRequest{FlowId: flowID, RunId: runID, Point: point.p, SkipReapply: o.skip, Reason: o.reason,
		RequestId: o.requestID}
	kind := retryable
	if o.requestID == "" {
		kind = once
	}
	var resp *dexpb.ResetFlowResponse
	err := c.call(ctx, "ResetFlow", flowID, kind, o.requestID, func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.ResetFlow(ctx, req)
		return err
	})
	return resp.GetRunId(), err
}
