package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// historyOut renders one history event (E26). The engine's events keep the
// values their messages carry (inputs, outputs, decisions, Waits, staged
// writes, messages); the run's own fields supply the rest: the flow type,
// the start's request ID and timeout policy, and the outputs of
// FLOW_CLOSED.
func historyOut(st *engine.FlowState, ev engine.HistoryEvent) *dexpb.HistoryEvent {
	out := &dexpb.HistoryEvent{EventId: uint64(ev.ID), Time: tsOut(ev.At)}
	switch ev.Type {
	case engine.EventFlowStarted:
		out.Event = &dexpb.HistoryEvent_FlowStarted{FlowStarted: flowStartedOut(st, ev.Start)}
	case engine.EventWaitForCompleted:
		out.Event = &dexpb.HistoryEvent_WaitForCompleted{WaitForCompleted: &dexpb.WaitForCompletedEvent{
			StepType: ev.StepType, StepExecutionId: ev.StepExecID, Attempt: uint32(ev.Attempt), Duration: durOut(ev.Duration),
			Wait: historyWaitOut(ev.Wait, ev), Writes: stagedOut(ev.Staged)}}
	case engine.EventWaitForFailed, engine.EventExecuteFailed:
		m := engine.MethodExecute
		if ev.Type == engine.EventWaitForFailed {
			m = engine.MethodWaitFor
		}
		e := &dexpb.StepAttemptFailedEvent{StepType: ev.StepType, StepExecutionId: ev.StepExecID, Duration: durOut(ev.Duration),
			NextAttemptTime: tsOut(ev.NextAttemptAt)}
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
			Decision: decisionOut(ev.Decision), ScheduledStepExecutionIds: ev.Scheduled, Writes: stagedOut(ev.Staged)}}
	case engine.EventRPCCompleted:
		out.Event = &dexpb.HistoryEvent_RpcCompleted{RpcCompleted: &dexpb.RpcCompletedEvent{
			RpcName: ev.RPC, Input: valueOut(ev.Input), Output: valueOut(ev.Output), Duration: durOut(ev.Duration),
			Movements: movementsOut(ev.Movements), ScheduledStepExecutionIds: ev.Scheduled, Writes: stagedOut(ev.Staged),
			CancelStepTypes: ev.Canceled.GetSteps()}}
	case engine.EventChannelPublished:
		out.Event = &dexpb.HistoryEvent_ChannelPublished{ChannelPublished: &dexpb.ChannelPublishedEvent{
			Publishes: publishesOut(ev.Publishes), RequestId: ev.RequestID}}
	case engine.EventAttributesSet:
		out.Event = &dexpb.HistoryEvent_AttributesSet{AttributesSet: &dexpb.AttributesSetEvent{
			Attributes: attributeWritesOut(ev.Attributes)}}
	case engine.EventTimerSkipped:
		e := &dexpb.TimerSkippedEvent{StepExecutionId: ev.StepExecID}
		if ev.Timer != nil {
			e.TimerIndex, e.ConditionId = uint32(ev.Timer.Index), ev.Timer.ID
		}
		out.Event = &dexpb.HistoryEvent_TimerSkipped{TimerSkipped: e}
	case engine.EventStepCanceled:
		e := &dexpb.StepCanceledEvent{StepType: ev.StepType, StepExecutionId: ev.StepExecID}
		if c := ev.Canceled; c != nil {
			e.SiblingsOnly, e.CausedBy = c.Scope == engine.CancelSiblings, c.Cause
		}
		out.Event = &dexpb.HistoryEvent_StepCanceled{StepCanceled: e}
	case engine.EventFlowClosed:
		e := &dexpb.FlowClosedEvent{Outputs: outputsOut(st)}
		if ev.Close != nil {
			e.Status = statusOut(ev.Close.Status)
			if ev.Close.Status != engine.StatusCompleted {
				e.Error = &dexpb.FlowError{Type: errorTypeOut(ev.Close.ErrorType), Message: ev.Close.Message}
			}
		}
		out.Event = &dexpb.HistoryEvent_FlowClosed{FlowClosed: e}
	case engine.EventSubFlowCompleted:
		out.Event = subFlowEventOut(ev)
	case engine.EventUser:
		e := &dexpb.UserEventRecorded{StepType: ev.StepType, StepExecutionId: ev.StepExecID, RpcName: ev.RPC}
		if evs := ev.Staged.UserEvents(); len(evs) > 0 {
			e.Name, e.Value = evs[0].Name, valueOut(evs[0].Value)
		}
		out.Event = &dexpb.HistoryEvent_User{User: e}
	}
	return out
}

func flowStartedOut(st *engine.FlowState, s *engine.StartInfo) *dexpb.FlowStartedEvent {
	out := &dexpb.FlowStartedEvent{FlowType: st.FlowType, RequestId: st.StartRequestID,
		FlowTimeoutPolicy: timeoutPolicyOut(st.TimeoutPolicy)}
	if s == nil {
		return out
	}
	if s.StartStep != nil {
		out.StartStep, out.StartStepExecutionId = movementOut(*s.StartStep), s.StartStepExecID
	}
	out.InitialAttributes = attributeWritesOut(s.Attributes)
	out.FlowTimeout = durOut(s.Timeout)
	out.IdReusePolicy = reusePolicyOut(s.IDReusePolicy)
	out.StartDelay = durOut(s.StartDelay)
	out.RetryAttempt, out.RetriedRunId = uint32(s.RetryAttempt), s.RetriedRunID // E34
	out.TerminatedRunId = s.TerminatedRunID
	out.ResetInfo = resetInfoOut(s.Reset) // E37
	return out
}

func reusePolicyOut(p engine.IDReusePolicy) dexpb.IdReusePolicy {
	switch p {
	case engine.ReuseDisallow:
		return dexpb.IdReusePolicy_ID_REUSE_POLICY_DISALLOW
	case engine.ReuseAllowIfNotRunning:
		return dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_NOT_RUNNING
	case engine.ReuseAllowIfPreviousFailed:
		return dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_FAILED
	case engine.ReuseTerminateIfRunning:
		return dexpb.IdReusePolicy_ID_REUSE_POLICY_TERMINATE_IF_RUNNING
	}
	return dexpb.IdReusePolicy_ID_REUSE_POLICY_UNSPECIFIED
}

// historyWaitOut renders the Wait a WaitFor returned. The engine stores
// timers as absolute fire times; the duration the WaitFor asked for is the
// fire time minus the moment the Wait was stored, the event's time.
func historyWaitOut(w *engine.StoredWait, ev engine.HistoryEvent) *dexpb.Wait {
	out := waitOut(w)
	var conds []*dexpb.WaitCondition
	switch k := out.GetKind().(type) {
	case *dexpb.Wait_Until:
		conds = []*dexpb.WaitCondition{k.Until}
	case *dexpb.Wait_AllOf:
		conds = k.AllOf.GetConditions()
	case *dexpb.Wait_AnyOf:
		conds = k.AnyOf.GetConditions()
	}
	for i, c := range conds {
		if t := c.GetTimer(); t != nil && i < len(w.Conditions) {
			t.Duration = durOut(w.Conditions[i].FireAt.Sub(ev.At))
		}
	}
	return out
}

// attributeWritesOut renders attribute writes in their order.
func attributeWritesOut(ws []engine.AttributeWrite) []*dexpb.Attribute {
	if len(ws) == 0 {
		return nil
	}
	out := make([]*dexpb.Attribute, len(ws))
	for i, w := range ws {
		out[i] = &dexpb.Attribute{Name: w.Name, Value: valueOut(w.Value)}
	}
	return out
}

// publishesOut renders messages in their order, one ChannelPublish per run
// of messages to the same channel (how the SDK groups them).
func publishesOut(ps []engine.Publish) []*dexpb.ChannelPublish {
	var out []*dexpb.ChannelPublish
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].GetChannel() == p.Channel {
			out[n-1].Values = append(out[n-1].Values, valueOut(p.Value))
			continue
		}
		out = append(out, &dexpb.ChannelPublish{Channel: p.Channel, Values: []*dexpb.EncodedValue{valueOut(p.Value)}})
	}
	return out
}

// stagedOut renders a completion's writes; its user events are USER_EVENT
// events of their own (E32).
func stagedOut(s engine.Staged) *dexpb.StagedWrites {
	if len(s.Attributes) == 0 && len(s.Publishes) == 0 {
		return nil
	}
	return &dexpb.StagedWrites{AttributeWrites: attributeWritesOut(s.Attributes), ChannelPublishes: publishesOut(s.Publishes)}
}

func decisionOut(d *engine.Decision) *dexpb.StepDecision {
	out := decisionKindOut(d)
	if out != nil && d.Cancel != nil {
		out.CancelStepTypes, out.CancelSiblingStepTypes = d.Cancel.Steps, d.Cancel.Siblings
	}
	return out
}

func decisionKindOut(d *engine.Decision) *dexpb.StepDecision {
	if d == nil {
		return nil
	}
	switch d.Kind {
	case engine.DecideMovements:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_Movements{Movements: &dexpb.Movements{Movements: movementsOut(d.Movements)}}}
	case engine.DecideGracefulComplete:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_GracefulComplete{GracefulComplete: &dexpb.GracefulComplete{Output: valueOut(d.Output)}}}
	case engine.DecideForceComplete:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceComplete{ForceComplete: &dexpb.ForceComplete{Output: valueOut(d.Output)}}}
	case engine.DecideForceFail:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceFail{ForceFail: &dexpb.ForceFail{Reason: d.Reason}}}
	case engine.DecideDeadEnd:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_DeadEnd{DeadEnd: &dexpb.DeadEnd{}}}
	case engine.DecideForceCompleteIfChannelsEmpty:
		return &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceCompleteIfChannelsEmpty{
			ForceCompleteIfChannelsEmpty: &dexpb.ForceCompleteIfChannelsEmpty{Output: valueOut(d.Output), Channels: d.CloseIfEmpty().Channels,
				Fallback: movementsOut(d.Movements), ChannelsEmpty: d.CloseIfEmpty().ChannelsEmpty}}}
	}
	return nil
}

func movementsOut(ms []engine.Movement) []*dexpb.Movement {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*dexpb.Movement, len(ms))
	for i, m := range ms {
		out[i] = movementOut(m)
	}
	return out
}

func movementOut(m engine.Movement) *dexpb.Movement {
	return &dexpb.Movement{StepType: m.StepType, Input: valueOut(m.Input), Options: stepOptionsOut(m.Options), SkipWaitFor: m.SkipWaitFor}
}

// stepOptionsOut renders options as given (unset fields stay unset), the
// inverse of stepOptionsIn. An explicit EXECUTE_FAILURE_POLICY_FAIL_FLOW
// comes back unset: the engine does not tell it from the default.
func stepOptionsOut(o *engine.StepOptions) *dexpb.StepOptions {
	if o == nil {
		return nil
	}
	out := &dexpb.StepOptions{WaitFor: methodOptionsOut(o.WaitFor), Execute: methodOptionsOut(o.Execute)}
	switch o.WaitForFailure {
	case engine.FailFlow:
		out.WaitForFailurePolicy = dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_FAIL_FLOW
	case engine.Proceed:
		out.WaitForFailurePolicy = dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_PROCEED
	}
	if o.RecoveryStep != "" {
		out.ExecuteFailurePolicy = dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP
		out.ExecuteRecoveryStepType = o.RecoveryStep
	}
	return out
}

func methodOptionsOut(o *engine.MethodOptions) *dexpb.StepMethodOptions {
	if o == nil {
		return nil
	}
	out := &dexpb.StepMethodOptions{AttemptTimeout: optDurationOut(o.Timeout), Locks: o.Locks, HeartbeatTimeout: optDurationOut(o.HeartbeatTimeout)}
	switch o.Durability {
	case engine.SYNC:
		out.Durability = dexpb.AttemptDurability_ATTEMPT_DURABILITY_SYNC
	case engine.ASYNC:
		out.Durability = dexpb.AttemptDurability_ATTEMPT_DURABILITY_ASYNC
	}
	if r := o.Retry; r != nil {
		out.RetryPolicy = &dexpb.RetryPolicy{InitialInterval: optDurationOut(r.InitialInterval),
			MaximumInterval: optDurationOut(r.MaxInterval), MaximumTotalDuration: optDurationOut(r.MaxTotal)}
		if r.Coefficient != nil {
			c := *r.Coefficient
			out.RetryPolicy.BackoffCoefficient = &c
		}
		if r.MaxAttempts != nil {
			n := uint32(max(*r.MaxAttempts, 0))
			out.RetryPolicy.MaximumAttempts = &n
		}
	}
	return out
}

// optDurationOut renders an optional duration: set (even to zero) or not.
func optDurationOut(d *time.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(*d)
}
