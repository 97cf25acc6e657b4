package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// ProgressBackend is the part of a Backend that serves the long polls on a
// run's progress (E35). A backend without it answers UNIMPLEMENTED.
type ProgressBackend interface {
	// WaitForStepCompletion waits until at least count executions of
	// stepType have finished in the run (the latest at the time of the
	// call when runID is empty) and returns its state and the number
	// finished. A run that closed with fewer finished is an *engine.Error
	// with CodeFailedPrecondition. It returns ctx's error when ctx ends.
	WaitForStepCompletion(ctx context.Context, flowID, runID, stepType string, count int) (*engine.FlowState, int, error)
	// WaitForAttribute waits until the run's attribute name has a value
	// (equals nil) or one equal to *equals (encoding and bytes), and returns
	// the state and the value, with its bytes. A run that closed without
	// meeting it is an *engine.Error with CodeFailedPrecondition.
	WaitForAttribute(ctx context.Context, flowID, runID, name string, equals *engine.Value) (*engine.FlowState, engine.Value, error)
}

// progressBackend returns the active backend's long polls on progress,
// for a poll on flowID.
func (f *flowService) progressBackend(flowID string) (ProgressBackend, Backend, error) {
	b, err := f.s.active()
	if err != nil {
		return nil, nil, err
	}
	if flowID == "" {
		return nil, nil, statusOf(argError("flowId", "must not be empty"))
	}
	pb, ok := b.(ProgressBackend)
	if !ok {
		return nil, nil, status.Error(codes.Unimplemented, "this server does not serve long polls on progress")
	}
	return pb, b, nil
}

// longPoll bounds a long poll by the server's cap (WaitForFlowMax) and the
// request's timeout, whichever is shorter.
func (f *flowService) longPoll(ctx context.Context, timeout *time.Duration) (context.Context, context.CancelFunc, time.Duration) {
	limit := f.s.opts.WaitForFlowMax
	if timeout != nil && *timeout > 0 && *timeout < limit {
		limit = *timeout
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	return wctx, cancel, limit
}

func (f *flowService) WaitForStepCompletion(ctx context.Context, req *dexpb.WaitForStepCompletionRequest) (*dexpb.WaitForStepCompletionResponse, error) {
	pb, b, err := f.progressBackend(req.GetFlowId())
	if err != nil {
		return nil, err
	}
	switch {
	case req.GetStepType() == "":
		return nil, statusOf(argError("stepType", "must not be empty"))
	case req.GetCount() > 1<<30:
		return nil, statusOf(argError("count", "must be at most %d, got %d", 1<<30, req.GetCount()))
	}
	timeout, err := optDuration("timeout", req.GetTimeout())
	if err != nil {
		return nil, statusOf(err)
	}
	count := max(int(req.GetCount()), 1)
	wctx, cancel, limit := f.longPoll(ctx, timeout)
	defer cancel()
	st, n, err := pb.WaitForStepCompletion(wctx, req.GetFlowId(), req.GetRunId(), req.GetStepType(), count)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "flow %q: fewer than %d executions of step type %q finished after %v; wait again",
			req.GetFlowId(), count, req.GetStepType(), limit)
	}
	if err != nil {
		return nil, statusOf(err)
	}
	if !b.Serving() {
		return nil, f.s.unavailable()
	}
	return &dexpb.WaitForStepCompletionResponse{RunId: st.RunID, Finished: uint32(n)}, nil
}

func (f *flowService) WaitForAttribute(ctx context.Context, req *dexpb.WaitForAttributeRequest) (*dexpb.WaitForAttributeResponse, error) {
	pb, b, err := f.progressBackend(req.GetFlowId())
	if err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, statusOf(argError("name", "must not be empty"))
	}
	var equals *engine.Value
	switch c := req.GetCondition().(type) {
	case *dexpb.WaitForAttributeRequest_Exists:
		if !c.Exists {
			return nil, statusOf(argError("exists", "must be true (wait for a value); use equals for a value"))
		}
	case *dexpb.WaitForAttributeRequest_Equals:
		v, err := requiredValueIn("equals", c.Equals)
		if err != nil {
			return nil, statusOf(err)
		}
		equals = &v
	default:
		return nil, statusOf(argError("condition", "set exists or equals"))
	}
	timeout, err := optDuration("timeout", req.GetTimeout())
	if err != nil {
		return nil, statusOf(err)
	}
	wctx, cancel, limit := f.longPoll(ctx, timeout)
	defer cancel()
	st, v, err := pb.WaitForAttribute(wctx, req.GetFlowId(), req.GetRunId(), req.GetName(), equals)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "flow %q: attribute %q does not meet the condition after %v; wait again",
			req.GetFlowId(), req.GetName(), limit)
	}
	if err != nil {
		return nil, statusOf(err)
	}
	if !b.Serving() {
		return nil, f.s.unavailable()
	}
	return &dexpb.WaitForAttributeResponse{RunId: st.RunID, Value: valueOut(v)}, nil
}
