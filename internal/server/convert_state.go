package server

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

func statusOut(s engine.Status) dexpb.FlowStatus {
	switch s {
	case engine.StatusRunning:
		return dexpb.FlowStatus_FLOW_STATUS_RUNNING
	case engine.StatusCompleted:
		return dexpb.FlowStatus_FLOW_STATUS_COMPLETED
	case engine.StatusFailed:
		return dexpb.FlowStatus_FLOW_STATUS_FAILED
	case engine.StatusCanceled:
		return dexpb.FlowStatus_FLOW_STATUS_CANCELED
	case engine.StatusTerminated:
		return dexpb.FlowStatus_FLOW_STATUS_TERMINATED
	}
	return dexpb.FlowStatus_FLOW_STATUS_UNSPECIFIED
}

func statusIn(field string, s dexpb.FlowStatus) (engine.Status, error) {
	switch s {
	case dexpb.FlowStatus_FLOW_STATUS_RUNNING:
		return engine.StatusRunning, nil
	case dexpb.FlowStatus_FLOW_STATUS_COMPLETED:
		return engine.StatusCompleted, nil
	case dexpb.FlowStatus_FLOW_STATUS_FAILED:
		return engine.StatusFailed, nil
	case dexpb.FlowStatus_FLOW_STATUS_CANCELED:
		return engine.StatusCanceled, nil
	case dexpb.FlowStatus_FLOW_STATUS_TERMINATED:
		return engine.StatusTerminated, nil
	case dexpb.FlowStatus_FLOW_STATUS_CONTINUED_AS_NEW:
		return "CONTINUED_AS_NEW", nil // tier 2: matches nothing yet
	}
	return "", argError(field, "unknown or unspecified status %d", s)
}

func timeoutPolicyOut(p engine.TimeoutPolicy) dexpb.FlowTimeoutPolicy {
	switch p {
	case engine.TimeoutFail:
		return dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_FAIL
	case engine.TimeoutCancel:
		return dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_CANCEL
	case engine.TimeoutRunHandler:
		return dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_HANDLER
	}
	return dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_UNSPECIFIED
}

func errorTypeOut(t engine.ErrorType) dexpb.FlowErrorType {
	switch t {
	case engine.ErrStepDecisionFailingFlow:
		return dexpb.FlowErrorType_FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW
	case engine.ErrClientAPIFailingFlow:
		return dexpb.FlowErrorType_FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW
	case engine.ErrWorkerAPIFail:
		return dexpb.FlowErrorType_FLOW_ERROR_TYPE_WORKER_API_FAIL
	case engine.ErrFlowTimeout:
		return dexpb.FlowErrorType_FLOW_ERROR_TYPE_FLOW_TIMEOUT
	case engine.ErrInvalidUserFlowCode:
		return dexpb.FlowErrorType_FLOW_ERROR_TYPE_INVALID_USER_FLOW_CODE
	case engine.ErrInternal:
		return dexpb.FlowErrorType_FLOW_ERROR_TYPE_INTERNAL
	}
	return dexpb.FlowErrorType_FLOW_ERROR_TYPE_UNSPECIFIED
}

// flowErrorOut says why a run ended other than COMPLETED (E7). For a
// worker failure the step and its last attempt come from the history.
func flowErrorOut(st *engine.FlowState) *dexpb.FlowError {
	if st.Close == nil || st.Status == engine.StatusCompleted || st.Status == engine.StatusRunning {
		return nil
	}
	out := &dexpb.FlowError{Type: errorTypeOut(st.Close.ErrorType), Message: st.Close.Message}
	if st.Close.ErrorType == engine.ErrWorkerAPIFail || st.Close.ErrorType == engine.ErrInvalidUserFlowCode {
		for i := len(st.History) - 1; i >= 0; i-- {
			ev := st.History[i]
			if (ev.Type == engine.EventWaitForFailed || ev.Type == engine.EventExecuteFailed) && ev.Failure != nil {
				m := engine.MethodExecute
				if ev.Type == engine.EventWaitForFailed {
					m = engine.MethodWaitFor
				}
				out.StepType, out.StepExecutionId = ev.StepType, ev.StepExecID
				out.LastAttemptFailure = failureOut(m, ev.Attempt, ev.At, *ev.Failure)
				break
			}
		}
	}
	return out
}

func summaryOut(s engine.Summary) *dexpb.FlowSummary {
	return &dexpb.FlowSummary{FlowType: s.FlowType, FlowId: s.FlowID, RunId: s.RunID, Status: statusOut(s.Status),
		StartTime: tsOut(s.StartedAt), CloseTime: tsOut(s.ClosedAt), ParentFlowId: s.ParentFlowID}
}

// fullSummaryOut adds what only the state knows: the timeout and the error.
func fullSummaryOut(st *engine.FlowState) *dexpb.FlowSummary {
	out := summaryOut(st.Summary())
	out.FlowTimeoutPolicy = timeoutPolicyOut(st.TimeoutPolicy)
	if !st.TimeoutAt.IsZero() {
		out.FlowTimeout = durOut(st.TimeoutAt.Sub(st.StartedAt))
	}
	out.Error = flowErrorOut(st)
	return out
}

// outputsOut lists the completion outputs with their decision and time,
// which the history records (E7).
func outputsOut(st *engine.FlowState) []*dexpb.StepOutput {
	out := make([]*dexpb.StepOutput, 0, len(st.Outputs))
	for _, o := range st.Outputs {
		so := &dexpb.StepOutput{StepType: o.StepType, StepExecutionId: o.StepExecID, Output: valueOut(o.Value)}
		for _, ev := range st.History {
			if ev.Type == engine.EventExecuteCompleted && ev.StepExecID == o.StepExecID {
				so.ForceComplete = ev.Decision != nil && (ev.Decision.Kind == engine.DecideForceComplete ||
					ev.Decision.Kind == engine.DecideForceCompleteIfChannelsEmpty && ev.Decision.CloseIfEmpty().ChannelsEmpty)
				so.Time = tsOut(ev.At)
			}
		}
		out = append(out, so)
	}
	return out
}

func resultOut(st *engine.FlowState) *dexpb.FlowResult {
	return &dexpb.FlowResult{FlowType: st.FlowType, FlowId: st.FlowID, RunId: st.RunID, Status: statusOut(st.Status),
		Outputs: outputsOut(st), Error: flowErrorOut(st), CloseTime: tsOut(st.ClosedAt)}
}

func phaseOut(p engine.Phase) dexpb.StepPhase {
	switch p {
	case engine.PhaseWaitFor:
		return dexpb.StepPhase_STEP_PHASE_WAIT_FOR
	case engine.PhaseWaiting:
		return dexpb.StepPhase_STEP_PHASE_WAITING
	case engine.PhaseExecute:
		return dexpb.StepPhase_STEP_PHASE_EXECUTE
	}
	return dexpb.StepPhase_STEP_PHASE_UNSPECIFIED
}

// flowStateOut renders the live state of a run (E14, E26, W5).
func flowStateOut(st *engine.FlowState, info TaskInfo, maxMessages int, now time.Time) *dexpb.FlowState {
	out := &dexpb.FlowState{Summary: fullSummaryOut(st), Attributes: attributesOut(st.Attributes, nil), Outputs: outputsOut(st),
		RetryRunId: st.RetryRunID(), ResetRunId: st.ResetRunID(), ResetFromRunId: resetFromRunID(st)}
	for _, s := range st.Steps {
		out.StepExecutions = append(out.StepExecutions, stepOut(st, s, info, now))
	}
	for _, l := range st.HeldLocks() {
		h := &dexpb.HeldLock{Attribute: l.Attribute, StepExecutionId: l.StepExecID, RpcName: l.RPCName, CallId: l.CallID}
		if l.StepExecID != "" {
			h.Method, h.Attempt = methodOut(l.Method), uint32(l.Attempt)
		}
		out.HeldLocks = append(out.HeldLocks, h)
	}
	for _, name := range slices.Sorted(maps.Keys(st.Channels)) {
		q := st.Channels[name]
		cq := &dexpb.ChannelQueue{Channel: name, Size: uint32(len(q))}
		for _, m := range q[:min(len(q), maxMessages)] {
			cq.Messages = append(cq.Messages, &dexpb.QueuedMessage{Value: valueOut(m.Value)})
		}
		out.Channels = append(out.Channels, cq)
	}
	noWorker := !info.HasWorker(st.FlowType)
	for _, t := range st.PendingTasks() {
		if t.NotBefore.After(now) {
			continue // waiting for its retry delay, not ready yet
		}
		out.PendingTasks = append(out.PendingTasks, &dexpb.PendingTask{Kind: methodOut(t.Method), StepType: t.StepType,
			StepExecutionId: t.StepExecID, Attempt: uint32(t.Attempt), ReadyTime: tsOut(t.NotBefore), NoWorker: noWorker})
	}
	return out
}

func stepOut(st *engine.FlowState, s *engine.StepExec, info TaskInfo, now time.Time) *dexpb.StepExecutionState {
	out := &dexpb.StepExecutionState{StepType: s.Type, StepExecutionId: s.ID, Phase: phaseOut(s.Phase),
		Input: valueOut(s.Input), ScheduleTime: tsOut(s.CreatedAt), Options: resolvedOut(s.Options), Wait: waitStateOut(s.Wait)}
	if s.Phase != engine.PhaseWaiting {
		a := s.Attempt
		as := &dexpb.AttemptState{Method: methodOut(a.Method), Attempt: uint32(a.Number), FirstAttemptTime: tsOut(a.FirstAt)}
		switch {
		case a.State == engine.AttemptRunning:
			as.Status = dexpb.AttemptStatus_ATTEMPT_STATUS_RUNNING
			as.StartTime, as.Deadline = tsOut(a.StartedAt), tsOut(a.TimeoutAt)
			as.WorkerId = info.WorkerOf(engine.Token{Epoch: a.Epoch, FlowID: st.FlowID, RunID: st.RunID,
				StepExecID: s.ID, Method: a.Method, Attempt: a.Number})
		case a.NotBefore.After(now):
			as.Status = dexpb.AttemptStatus_ATTEMPT_STATUS_BACKOFF
			as.NextAttemptTime = tsOut(a.NotBefore)
		default:
			as.Status = dexpb.AttemptStatus_ATTEMPT_STATUS_PENDING
		}
		out.Attempt = as
	}
	if f := s.LastFailure; f != nil {
		out.LastFailure = failureOut(f.Method, f.Attempt, f.At, f.Failure)
	}
	if s.WaitForFailed != nil {
		out.WaitForFailed = true
		out.WaitForFailure = waitForFailureOut(s.WaitForFailed)
	}
	return out
}

// taskOut renders a task for the worker (W2).
func taskOut(t *engine.Task) *dexpb.Task {
	out := &dexpb.Task{
		Kind: methodOut(t.Method), TaskToken: t.Token.Encode(), FlowType: t.FlowType, FlowId: t.FlowID, RunId: t.RunID,
		StepType: t.StepType, StepExecutionId: t.StepExecID, Attempt: uint32(t.Attempt),
		FirstAttemptTime: tsOut(t.FirstAt), AttemptTimeout: durOut(t.Timeout), Input: valueOut(t.Input),
		Attributes: attributesOut(t.Attributes, nil), ConditionResults: resultsOut(t.Results), RpcName: t.RPC,
		TraceContext: t.TraceContext, HeartbeatTimeout: durOut(t.HeartbeatTimeout),
	}
	if t.HeartbeatDetails != nil {
		out.HeartbeatDetails = valueOut(*t.HeartbeatDetails)
	}
	out.Locals = localsOut(t.Locals)
	if t.Method == engine.MethodRPC {
		out.Attempt = 1
	} else {
		out.MaxAttempts = uint32(min(max(t.MaxAttempts, 0), math.MaxUint32)) //nolint:gosec // clamped
		out.RetryDeadline, out.RetryDelay = tsOut(t.RetryDeadline), durOut(t.RetryDelay)
	}
	if t.WaitForFailed != nil {
		out.WaitForFailed = true
		out.WaitForFailure = waitForFailureOut(t.WaitForFailed)
	}
	if len(t.QueueSizes) > 0 {
		out.ChannelQueueSizes = map[string]uint32{}
		for k, n := range t.QueueSizes {
			if n > 0 {
				out.ChannelQueueSizes[k] = uint32(n)
			}
		}
	}
	return out
}

// waitForFailureOut renders the WaitFor failure an Execute runs with under
// PROCEED (E11): the last WaitFor attempt, when it failed, and its error.
func waitForFailureOut(f *engine.LastFailure) *dexpb.AttemptFailure {
	return failureOut(engine.MethodWaitFor, f.Attempt, f.At, f.Failure)
}
