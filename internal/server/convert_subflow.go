package server

import (
	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// subFlowIn converts a SubFlow condition (E31). The engine validates the
// rest (flow type, sizes, policies) and fails the WaitFor attempt with
// INVALID_USER_FLOW_CODE naming the field.
func subFlowIn(field string, c *dexpb.SubFlowCondition) (*engine.SubFlowCondition, error) {
	out := &engine.SubFlowCondition{FlowType: c.GetFlowType(), StartStep: c.GetStartStep()}
	var err error
	if out.Input, err = valueIn(field+".input", c.GetInput()); err != nil {
		return nil, err
	}
	if out.Timeout, out.TimeoutPolicy, err = flowTimeoutIn(field+".", c.GetFlowTimeout(), c.GetFlowTimeoutPolicy()); err != nil {
		return nil, err
	}
	if len(c.GetInitialAttributes()) > 0 {
		if out.Attributes, err = attributesIn(field+".initialAttributes", c.GetInitialAttributes()); err != nil {
			return nil, err
		}
	}
	switch c.GetReusePolicy() {
	case dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_UNSPECIFIED:
	case dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY:
		out.Reuse = engine.SubFlowRestartIfAbnormal
	case dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_ATTACH:
		out.Reuse = engine.SubFlowAttach
	case dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_ALWAYS_RESTART:
		out.Reuse = engine.SubFlowAlwaysRestart
	default:
		return nil, argError(field+".reusePolicy", "unknown value %d", c.GetReusePolicy())
	}
	return out, nil
}

func subFlowReuseOut(p engine.SubFlowReuse) dexpb.SubFlowReusePolicy {
	switch p {
	case engine.SubFlowAttach:
		return dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_ATTACH
	case engine.SubFlowAlwaysRestart:
		return dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_ALWAYS_RESTART
	case engine.SubFlowRestartIfAbnormal:
		return dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
	}
	return dexpb.SubFlowReusePolicy_SUB_FLOW_REUSE_POLICY_UNSPECIFIED
}

// subFlowCondOut renders a stored SubFlow condition as the WaitFor gave it.
func subFlowCondOut(sf *engine.StoredSubFlow) *dexpb.SubFlowCondition {
	sp := sf.Spec
	out := &dexpb.SubFlowCondition{FlowType: sp.FlowType, StartStep: sp.StartStep, Input: valueOut(sp.Input),
		FlowTimeoutPolicy: timeoutPolicyOut(sp.TimeoutPolicy), InitialAttributes: attributeWritesOut(sp.Attributes),
		ReusePolicy: subFlowReuseOut(sp.Reuse)}
	if sp.Timeout > 0 {
		out.FlowTimeout = durOut(sp.Timeout)
	}
	return out
}

// childResultOut renders what a SubFlow condition knows of its child: its
// result once it closed, else a RUNNING snapshot (E31).
func childResultOut(sf *engine.StoredSubFlow) *dexpb.FlowResult {
	r := sf.Result
	if r == nil {
		return &dexpb.FlowResult{FlowType: sf.Spec.FlowType, FlowId: sf.FlowID, RunId: sf.RunID,
			Status: dexpb.FlowStatus_FLOW_STATUS_RUNNING}
	}
	return engineResultOut(r)
}

// engineResultOut renders a result the engine recorded (a child's, E31).
func engineResultOut(r *engine.Result) *dexpb.FlowResult {
	out := &dexpb.FlowResult{FlowType: r.FlowType, FlowId: r.FlowID, RunId: r.RunID, Status: statusOut(r.Status),
		CloseTime: tsOut(r.ClosedAt)}
	for _, o := range r.Outputs {
		out.Outputs = append(out.Outputs, &dexpb.StepOutput{StepType: o.StepType, StepExecutionId: o.StepExecID,
			Output: valueOut(o.Value)})
	}
	if r.Status != engine.StatusCompleted && r.Status != engine.StatusRunning {
		out.Error = &dexpb.FlowError{Type: errorTypeOut(r.ErrorType), Message: r.Message}
	}
	return out
}

// subFlowResultOut is one SubFlow condition's entry in an Execute's results.
func subFlowResultOut(c engine.StoredCondition) *dexpb.SubFlowResult {
	return &dexpb.SubFlowResult{SubFlowConditionIndex: uint32(c.SubFlow.Index), ConditionId: c.ID,
		Satisfied: c.Satisfied, Result: childResultOut(c.SubFlow)}
}

// subFlowStateOut is one SubFlow condition of a stored Wait, for
// GetFlowState.
func subFlowStateOut(c engine.StoredCondition) *dexpb.SubFlowConditionState {
	sf := c.SubFlow
	out := &dexpb.SubFlowConditionState{SubFlowConditionIndex: uint32(sf.Index), ConditionId: c.ID,
		FlowType: sf.Spec.FlowType, FlowId: sf.FlowID, RunId: sf.RunID, Satisfied: c.Satisfied,
		ReusePolicy: subFlowReuseOut(sf.Spec.Reuse)}
	switch {
	case sf.Result != nil:
		out.Status = statusOut(sf.Result.Status)
	case sf.RunID != "":
		out.Status = dexpb.FlowStatus_FLOW_STATUS_RUNNING
	}
	return out
}

// subFlowEventOut renders a SUB_FLOW_COMPLETED history event.
func subFlowEventOut(ev engine.HistoryEvent) *dexpb.HistoryEvent_SubFlowCompleted {
	e := &dexpb.SubFlowCompletedEvent{StepType: ev.StepType, StepExecutionId: ev.StepExecID}
	if sf := ev.SubFlow; sf != nil {
		e.SubFlowConditionIndex, e.ConditionId = uint32(sf.Index), sf.ID
		if sf.Result != nil {
			e.Result = engineResultOut(sf.Result)
		}
	}
	return &dexpb.HistoryEvent_SubFlowCompleted{SubFlowCompleted: e}
}
