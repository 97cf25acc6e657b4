package server

import (
	"context"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// ResetFlow implements FlowService.ResetFlow (E37): the new run's ID is
// chosen by the backend. A retry (the request ID of the reset that
// replaced run_id) is answered that reset's new run.
func (f *flowService) ResetFlow(ctx context.Context, req *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error) {
	if req.GetRunId() == "" {
		return nil, statusOf(argError("runId", "must name the run to reset (its exact run ID)"))
	}
	pt, err := resetPointIn(req.GetPoint())
	if err != nil {
		return nil, statusOf(err)
	}
	c := engine.ResetFlow{FlowID: req.GetFlowId(), RunID: req.GetRunId(), Point: pt,
		SkipReapply: req.GetSkipReapply(), Reason: req.GetReason(), RequestID: req.GetRequestId()}
	res, err := f.command(ctx, req.GetFlowId(), c)
	if err != nil {
		return nil, err
	}
	return &dexpb.ResetFlowResponse{RunId: res.RunID, ResetRunId: req.GetRunId()}, nil
}

func resetPointIn(p *dexpb.ResetPoint) (engine.ResetPoint, error) {
	switch x := p.GetPoint().(type) {
	case *dexpb.ResetPoint_Beginning:
		if !x.Beginning {
			return engine.ResetPoint{}, argError("point.beginning", "must be true when set")
		}
		return engine.ResetPoint{Kind: engine.ResetBeginning}, nil
	case *dexpb.ResetPoint_StepType:
		if x.StepType == "" {
			return engine.ResetPoint{}, argError("point.stepType", "must not be empty")
		}
		return engine.ResetPoint{Kind: engine.ResetStepType, StepType: x.StepType}, nil
	case *dexpb.ResetPoint_StepExecution:
		id := x.StepExecution.GetStepExecutionId()
		if id == "" {
			return engine.ResetPoint{}, argError("point.stepExecution.stepExecutionId", "must not be empty")
		}
		return engine.ResetPoint{Kind: engine.ResetStepExecution, StepExecID: id,
			BeforeExecute: x.StepExecution.GetBeforeExecute()}, nil
	case *dexpb.ResetPoint_EventTime:
		if x.EventTime == nil || !x.EventTime.IsValid() {
			return engine.ResetPoint{}, argError("point.eventTime", "must be a valid time")
		}
		return engine.ResetPoint{Kind: engine.ResetEventTime, Time: x.EventTime.AsTime()}, nil
	}
	return engine.ResetPoint{}, argError("point", "must be set: beginning, stepType, stepExecution or eventTime")
}

func resetPointOut(p engine.ResetPoint) *dexpb.ResetPoint {
	switch p.Kind {
	case engine.ResetStepType:
		return &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepType{StepType: p.StepType}}
	case engine.ResetStepExecution:
		return &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepExecution{StepExecution: &dexpb.StepExecutionPoint{
			StepExecutionId: p.StepExecID, BeforeExecute: p.BeforeExecute}}}
	case engine.ResetEventTime:
		return &dexpb.ResetPoint{Point: &dexpb.ResetPoint_EventTime{EventTime: tsOut(p.Time)}}
	}
	return &dexpb.ResetPoint{Point: &dexpb.ResetPoint_Beginning{Beginning: true}}
}

func resetInfoOut(r *engine.ResetStart) *dexpb.FlowResetInfo {
	if r == nil {
		return nil
	}
	return &dexpb.FlowResetInfo{ResetRunId: r.ResetRunID, Point: resetPointOut(r.Point),
		PointEventId: uint64(max(r.PointEventID, 0)), Reason: r.Reason, SkipReapply: r.SkipReapply,
		RequestId: r.RequestID}
}

// resetFromRunID is the run st was reset from, "" when a reset did not
// start it.
func resetFromRunID(st *engine.FlowState) string {
	if len(st.History) == 0 || st.History[0].Start == nil || st.History[0].Start.Reset == nil {
		return ""
	}
	return st.History[0].Start.Reset.ResetRunID
}
