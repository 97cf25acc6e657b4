package server

import (
	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// historyOut renders one history event (E26). The engine's history names
// what happened, with attempts, durations, failures and decision kinds; it
// does not keep the values (inputs, messages, outputs), so the events carry
// what it has: a decision comes back as its kind, a publish as the channel
// with one empty entry per message.
func historyOut(st *engine.FlowState, ev engine.HistoryEvent) *dexpb.HistoryEvent {
	out := &dexpb.HistoryEvent{EventId: uint64(ev.ID), Time: tsOut(ev.At)}
	switch ev.Type {
	case engine.EventFlowStarted:
		out.Event = &dexpb.HistoryEvent_FlowStarted{FlowStarted: &dexpb.FlowStartedEvent{
			FlowType: st.FlowType, RequestId: st.StartRequestID, TerminatedRunId: st.PreviousRunID,
			FlowTimeoutPolicy: timeoutPolicyOut(st.TimeoutPolicy)}}
	case engine.EventWaitForCompleted:
		out.Event = &dexpb.HistoryEvent_WaitForCompleted{WaitForCompleted: &dexpb.WaitForCompletedEvent{
			StepType: ev.StepType, StepExecutionId: ev.StepExecID, Attempt: uint32(ev.Attempt), Duration: durOut(ev.Duration)}}
	case engine.EventWaitForFailed, engine.EventExecuteFailed:
		m := engine.MethodExecute
		if ev.Type == engine.EventWaitForFailed {
			m = engine.MethodWaitFor
		}
		e := &dexpb.StepAttemptFailedEvent{StepType: ev.StepType, StepExecutionId: ev.StepExecID, Duration: durOut(ev.Duration)}
		if ev.Failure != nil {
			e.Failure = failureOut(m, ev.Attempt, ev.At, *ev.Failure)
		}
		if m == engine.MethodWaitFor {
			out.Event = &dexpb.HistoryEvent_WaitForFailed{WaitForFailed: e}
		} else {
			out.Event = &dexpb.HistoryEvent_ExecuteFailed{ExecuteFailed: e}
		}
	case engine.EventExecuteCompleted:
		out.Event = &dexpb.HistoryEvent_ExecuteCompleted{ExecuteCompleted: &dexpb.ExecuteCompletedEvent{
			StepType: ev.StepType, StepExecutionId: ev.StepExecID, Attempt: uint32(ev.Attempt), Duration: durOut(ev.Duration),
			Decision: decisionKindOut(ev.Decision)}}
	case engine.EventRPCCompleted:
		out.Event = &dexpb.HistoryEvent_RpcCompleted{RpcCompleted: &dexpb.RpcCompletedEvent{RpcName: ev.RPC, Duration: durOut(ev.Duration)}}
	case engine.EventChannelPublished:
		p := &dexpb.ChannelPublish{Channel: ev.Channel, Values: make([]*dexpb.EncodedValue, ev.Count)}
		for i := range p.Values {
			p.Values[i] = &dexpb.EncodedValue{}
		}
		out.Event = &dexpb.HistoryEvent_ChannelPublished{ChannelPublished: &dexpb.ChannelPublishedEvent{Publishes: []*dexpb.ChannelPublish{p}}}
	case engine.EventFlowClosed:
		e := &dexpb.FlowClosedEvent{Outputs: outputsOut(st)}
		if ev.Close != nil {
			e.Status = statusOut(ev.Close.Status)
			if ev.Close.Status != engine.StatusCompleted {
				e.Error = &dexpb.FlowError{Type: errorTypeOut(ev.Close.ErrorType), Message: ev.Close.Message}
			}
		}
		out.Event = &dexpb.HistoryEvent_FlowClosed{FlowClosed: e}
	}
	return out
}

func decisionKindOut(k engine.DecisionKind) *dexpb.StepDecision {
	switch k {
	case engine.DecideMovements:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_Movements{Movements: &dexpb.Movements{}}}
	case engine.DecideGracefulComplete:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_GracefulComplete{GracefulComplete: &dexpb.GracefulComplete{}}}
	case engine.DecideForceComplete:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceComplete{ForceComplete: &dexpb.ForceComplete{}}}
	case engine.DecideForceFail:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceFail{ForceFail: &dexpb.ForceFail{}}}
	case engine.DecideDeadEnd:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_DeadEnd{DeadEnd: &dexpb.DeadEnd{}}}
	}
	return nil
}
