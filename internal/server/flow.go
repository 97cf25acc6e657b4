package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/tracing"
)

// flowService is dex.FlowService. Writes return once durable (G3); reads
// answer from committed state and are answered UNAVAILABLE instead if the
// instance stopped serving while they read (L15).
type flowService struct {
	dexpb.UnimplementedFlowServiceServer
	s *Server
}

// read runs a read handler and re-checks the gate after it.
func read[T any](s *Server, fn func(b Backend) (T, error)) (T, error) {
	var zero T
	b, err := s.active()
	if err != nil {
		return zero, err
	}
	out, err := fn(b)
	if !b.Serving() {
		return zero, s.unavailable()
	}
	if err != nil {
		return zero, statusOf(err)
	}
	return out, nil
}

func (f *flowService) StartFlow(ctx context.Context, req *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
	b, err := f.s.active()
	if err != nil {
		return nil, err
	}
	c, err := startIn(req)
	if err != nil {
		return nil, statusOf(err)
	}
	c.TraceContext = tracing.Carrier(ctx) // nil unless this call is traced
	res, err := b.StartFlow(ctx, c)
	if err != nil {
		return nil, statusOf(err)
	}
	return &dexpb.StartFlowResponse{RunId: res.RunID, AlreadyStarted: res.AlreadyStarted}, nil
}

func startIn(req *dexpb.StartFlowRequest) (engine.StartFlow, error) {
	c := engine.StartFlow{FlowID: req.GetFlowId(), FlowType: req.GetFlowType(), RequestID: req.GetRequestId()}
	if ss := req.GetStartStep(); ss != nil {
		// An empty step type means the flow type's declared start step.
		m, err := movementBodyIn("startStep", ss)
		if err != nil {
			return c, err
		}
		if m.SkipWaitFor {
			return c, argError("startStep.skipWaitFor", "is not supported for the start step")
		}
		c.StartStep, c.Input, c.StartOptions = m.StepType, m.Input, m.Options
	}
	var err error
	if c.Timeout, c.TimeoutPolicy, err = flowTimeoutIn("", req.GetFlowTimeout(), req.GetFlowTimeoutPolicy()); err != nil {
		return c, err
	}
	if c.Attributes, err = attributesIn("initialAttributes", req.GetInitialAttributes()); err != nil {
		return c, err
	}
	if err := flowOptionsIn(req, &c); err != nil {
		return c, err
	}
	switch req.GetIdReusePolicy() {
	case dexpb.IdReusePolicy_ID_REUSE_POLICY_UNSPECIFIED:
	case dexpb.IdReusePolicy_ID_REUSE_POLICY_DISALLOW:
		c.IDReusePolicy = engine.ReuseDisallow
	case dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_NOT_RUNNING:
		c.IDReusePolicy = engine.ReuseAllowIfNotRunning
	case dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_FAILED:
		c.IDReusePolicy = engine.ReuseAllowIfPreviousFailed
	case dexpb.IdReusePolicy_ID_REUSE_POLICY_TERMINATE_IF_RUNNING:
		c.IDReusePolicy = engine.ReuseTerminateIfRunning
	default:
		return c, argError("idReusePolicy", "unknown value %d", req.GetIdReusePolicy())
	}
	return c, nil
}

func (f *flowService) StopFlow(ctx context.Context, req *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
	c := engine.StopFlow{FlowID: req.GetFlowId(), RunID: req.GetRunId(), Reason: req.GetReason()}
	switch req.GetType() {
	case dexpb.StopType_STOP_TYPE_UNSPECIFIED, dexpb.StopType_STOP_TYPE_CANCEL:
		c.Kind = engine.StopCancel
	case dexpb.StopType_STOP_TYPE_TERMINATE:
		c.Kind = engine.StopTerminate
	case dexpb.StopType_STOP_TYPE_FAIL:
		c.Kind = engine.StopFail
	default:
		return nil, statusOf(argError("type", "unknown value %d", req.GetType()))
	}
	res, err := f.command(ctx, req.GetFlowId(), c)
	if err != nil {
		return nil, err
	}
	return &dexpb.StopFlowResponse{RunId: res.RunID, Status: statusOut(res.Status)}, nil
}

// ContinueAsNew continues the exact run as a new run (E37); a retry (the
// request ID that continued run_id) is answered that new run.
func (f *flowService) ContinueAsNew(ctx context.Context, req *dexpb.ContinueAsNewRequest) (*dexpb.ContinueAsNewResponse, error) {
	if req.GetRunId() == "" {
		return nil, statusOf(argError("runId", "must name the run to continue as new"))
	}
	c := engine.ContinueAsNew{FlowID: req.GetFlowId(), RunID: req.GetRunId(), Reason: req.GetReason(),
		RequestID: req.GetRequestId()}
	res, err := f.command(ctx, req.GetFlowId(), c)
	if err != nil {
		return nil, err
	}
	return &dexpb.ContinueAsNewResponse{NewRunId: res.RunID, Status: dexpb.FlowStatus_FLOW_STATUS_CONTINUED_AS_NEW}, nil
}

// command runs a client write command.
func (f *flowService) command(ctx context.Context, flowID string, c engine.Command) (CommandResult, error) {
	b, err := f.s.active()
	if err != nil {
		return CommandResult{}, err
	}
	if flowID == "" {
		return CommandResult{}, statusOf(argError("flowId", "must not be empty"))
	}
	res, err := b.Command(ctx, flowID, c)
	return res, statusOf(err)
}

func (f *flowService) PublishToChannel(ctx context.Context, req *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
	if len(req.GetPublishes()) == 0 {
		return nil, statusOf(argError("publishes", "must not be empty"))
	}
	msgs, err := publishesIn("publishes", req.GetPublishes())
	if err != nil {
		return nil, statusOf(err)
	}
	res, err := f.command(ctx, req.GetFlowId(), engine.PublishToChannel{FlowID: req.GetFlowId(), RunID: req.GetRunId(),
		RequestID: req.GetRequestId(), Messages: msgs})
	if err != nil {
		return nil, err
	}
	// A duplicate (E16) is answered, like any command, once the publish
	// it repeats is durable.
	return &dexpb.PublishToChannelResponse{RunId: res.RunID, Duplicate: res.Duplicate}, nil
}

func (f *flowService) SetAttributes(ctx context.Context, req *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error) {
	if len(req.GetAttributes()) == 0 {
		return nil, statusOf(argError("attributes", "must not be empty"))
	}
	as, err := attributesIn("attributes", req.GetAttributes())
	if err != nil {
		return nil, statusOf(err)
	}
	res, err := f.command(ctx, req.GetFlowId(), engine.SetAttributes{FlowID: req.GetFlowId(), RunID: req.GetRunId(), Attributes: as})
	if err != nil {
		return nil, err
	}
	return &dexpb.SetAttributesResponse{RunId: res.RunID}, nil
}

func (f *flowService) GetAttributes(ctx context.Context, req *dexpb.GetAttributesRequest) (*dexpb.GetAttributesResponse, error) {
	return read(f.s, func(b Backend) (*dexpb.GetAttributesResponse, error) {
		st, err := b.Flow(ctx, req.GetFlowId(), req.GetRunId())
		if err != nil {
			return nil, err
		}
		return &dexpb.GetAttributesResponse{RunId: st.RunID, Attributes: attributesOut(st.Attributes, req.GetNames())}, nil
	})
}

func (f *flowService) InvokeRPC(ctx context.Context, req *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
	b, err := f.s.active()
	if err != nil {
		return nil, err
	}
	if req.GetFlowId() == "" {
		return nil, statusOf(argError("flowId", "must not be empty"))
	}
	in, err := valueIn("input", req.GetInput())
	if err != nil {
		return nil, statusOf(err)
	}
	timeout, err := optDuration("timeout", req.GetTimeout())
	if err != nil {
		return nil, statusOf(err)
	}
	var d time.Duration
	if timeout != nil {
		d = *timeout
	}
	res, err := b.InvokeRPC(ctx, engine.InvokeRPC{FlowID: req.GetFlowId(), RunID: req.GetRunId(), Name: req.GetRpcName(), Input: in,
		Locks: req.GetLocks()}, d)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, status.Errorf(codes.DeadlineExceeded, "RPC %q of flow %q: no result arrived in time (is a worker for the flow type connected?)",
			req.GetRpcName(), req.GetFlowId())
	}
	if err != nil {
		return nil, statusOf(err)
	}
	return &dexpb.InvokeRPCResponse{RunId: res.RunID, Output: valueOut(res.Output)}, nil
}

func (f *flowService) SkipTimer(ctx context.Context, req *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error) {
	c := engine.SkipTimer{FlowID: req.GetFlowId(), RunID: req.GetRunId(), StepExecID: req.GetStepExecutionId()}
	switch t := req.GetTimer().(type) {
	case *dexpb.SkipTimerRequest_ConditionId:
		if t.ConditionId == "" {
			return nil, statusOf(argError("conditionId", "must not be empty"))
		}
		c.TimerID = t.ConditionId
	case *dexpb.SkipTimerRequest_TimerIndex:
		c.TimerIndex = int(t.TimerIndex)
	default:
		return nil, statusOf(argError("timer", "set conditionId or timerIndex"))
	}
	_, err := f.command(ctx, req.GetFlowId(), c)
	if status.Code(err) == codes.FailedPrecondition {
		if b, aerr := f.s.active(); aerr == nil && !timerExists(ctx, b, c) {
			return nil, status.Errorf(codes.NotFound, "flow %q has no step execution %q with that timer", c.FlowID, c.StepExecID)
		}
	}
	if err != nil {
		return nil, err
	}
	return &dexpb.SkipTimerResponse{}, nil
}

// timerExists tells a timer that is not pending (FAILED_PRECONDITION) from
// one that does not exist (NOT_FOUND), on committed state.
func timerExists(ctx context.Context, b Backend, c engine.SkipTimer) bool {
	st, err := b.Flow(ctx, c.FlowID, c.RunID)
	if err != nil {
		// Only a flow or run that does not exist makes the timer unknown;
		// a read that failed tells nothing, and the refusal stands.
		return engine.CodeOf(err) != engine.CodeNotFound
	}
	if !st.Running() {
		return true // a closed flow: FAILED_PRECONDITION stands
	}
	s := st.Step(c.StepExecID)
	if s == nil || s.Wait == nil {
		return false
	}
	for _, cond := range s.Wait.Conditions {
		if cond.Kind == engine.CondTimer && ((c.TimerID != "" && cond.ID == c.TimerID) || (c.TimerID == "" && cond.TimerIndex == c.TimerIndex)) {
			return true
		}
	}
	return false
}

func (f *flowService) WaitForFlow(ctx context.Context, req *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
	b, err := f.s.active()
	if err != nil {
		return nil, err
	}
	limit := f.s.opts.WaitForFlowMax
	if t, err := optDuration("timeout", req.GetTimeout()); err != nil {
		return nil, statusOf(err)
	} else if t != nil && *t > 0 && *t < limit {
		limit = *t
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	st, err := b.WaitForFlow(wctx, req.GetFlowId(), req.GetRunId())
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "flow %q is still running after %v; wait again", req.GetFlowId(), limit)
	}
	if err != nil {
		return nil, statusOf(err)
	}
	if !b.Serving() {
		return nil, f.s.unavailable()
	}
	return &dexpb.WaitForFlowResponse{Result: resultOut(st)}, nil
}

func (f *flowService) GetFlowSummary(ctx context.Context, req *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
	return read(f.s, func(b Backend) (*dexpb.GetFlowSummaryResponse, error) {
		st, err := b.Flow(ctx, req.GetFlowId(), req.GetRunId())
		if err != nil {
			return nil, err
		}
		return &dexpb.GetFlowSummaryResponse{Summary: fullSummaryOut(st)}, nil
	})
}

func (f *flowService) GetFlowState(ctx context.Context, req *dexpb.GetFlowStateRequest) (*dexpb.GetFlowStateResponse, error) {
	maxMsgs := int(req.GetMaxMessagesPerChannel())
	if maxMsgs == 0 {
		maxMsgs = 100
	}
	return read(f.s, func(b Backend) (*dexpb.GetFlowStateResponse, error) {
		st, err := b.Flow(ctx, req.GetFlowId(), req.GetRunId())
		if err != nil {
			return nil, err
		}
		return &dexpb.GetFlowStateResponse{State: flowStateOut(st, b.TaskInfo(), maxMsgs, time.Now())}, nil
	})
}

func pageSize(n uint32) int {
	switch {
	case n == 0:
		return 100
	case n > 1000:
		return 1000
	}
	return int(n)
}

// History page tokens are "<runId>/<last event ID>", base64url.
func (f *flowService) GetHistoryEvents(ctx context.Context, req *dexpb.GetHistoryEventsRequest) (*dexpb.GetHistoryEventsResponse, error) {
	return read(f.s, func(b Backend) (*dexpb.GetHistoryEventsResponse, error) {
		st, err := b.Flow(ctx, req.GetFlowId(), req.GetRunId())
		if err != nil {
			return nil, err
		}
		after := 0
		if tok := req.GetPageToken(); tok != "" {
			raw, derr := base64.RawURLEncoding.DecodeString(tok)
			runID, n, ok := strings.Cut(string(raw), "/")
			v, perr := strconv.Atoi(n)
			if derr != nil || !ok || perr != nil || v < 0 || runID != st.RunID {
				return nil, argError("pageToken", "does not belong to run %s of flow %q", st.RunID, st.FlowID)
			}
			after = v
		} else if id := req.GetFirstEventId(); id > 1 {
			after = int(min(id, 1<<31)) - 1
		}
		evs, next := st.HistoryPage(after, pageSize(req.GetPageSize()))
		out := &dexpb.GetHistoryEventsResponse{RunId: st.RunID}
		for _, ev := range evs {
			out.Events = append(out.Events, historyOut(st, ev))
		}
		if next > 0 {
			out.NextPageToken = base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s/%d", st.RunID, next))
		}
		return out, nil
	})
}

func (f *flowService) ListFlows(ctx context.Context, req *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error) {
	q := ListQuery{FlowType: req.GetFlowType(), PageSize: pageSize(req.GetPageSize()), PageToken: req.GetPageToken()}
	for i, s := range req.GetStatuses() {
		es, err := statusIn(fmt.Sprintf("statuses[%d]", i), s)
		if err != nil {
			return nil, statusOf(err)
		}
		q.Statuses = append(q.Statuses, es)
	}
	if t := req.GetStartTimeFrom(); t != nil {
		q.From = t.AsTime()
	}
	if t := req.GetStartTimeTo(); t != nil {
		q.To = t.AsTime()
	}
	return read(f.s, func(b Backend) (*dexpb.ListFlowsResponse, error) {
		sums, next, err := b.ListFlows(ctx, q)
		if err != nil {
			return nil, err
		}
		out := &dexpb.ListFlowsResponse{NextPageToken: next}
		for _, s := range sums {
			out.Flows = append(out.Flows, summaryOut(s))
		}
		return out, nil
	})
}
