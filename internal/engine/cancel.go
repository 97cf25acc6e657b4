package engine

import (
	"fmt"
	"slices"
)

// CancelSelector is a decision's step cancellation (E29): every active
// (queued, waiting or running) step execution of the Steps types in the
// flow, and those of the Siblings types that the deciding execution's own
// parent scheduled (same StepExec.ParentID). The selection is taken when
// the decision commits, before its movements are created, so the
// executions it schedules are never selected.
type CancelSelector struct {
	Steps    []string `json:"steps,omitempty"`
	Siblings []string `json:"siblings,omitempty"`
}

// IsZero reports whether s selects nothing.
func (s *CancelSelector) IsZero() bool { return s == nil || len(s.Steps) == 0 && len(s.Siblings) == 0 }

// CancelScope says which selector cancelled a step execution (E29).
type CancelScope string

// Cancel scopes.
const (
	CancelFlowWide CancelScope = "FLOW"     // CancelSteps
	CancelSiblings CancelScope = "SIBLINGS" // CancelSiblingSteps
)

// StepsCanceled removes active step executions that a decision or an RPC
// cancelled (E29). Cause is the step execution whose decision it was, or
// "rpc:<name>" (with the call's ID) for an RPC. Each listed execution
// leaves the state without running anything more: a late result is
// refused as stale, a waiting one's timers are no longer pending.
type StepsCanceled struct {
	Cause  string         `json:"cause"`
	CallID string         `json:"callId,omitempty"`
	Steps  []CanceledStep `json:"steps"`
}

// CanceledStep is one cancelled step execution and the selector that took
// it; a flow-wide selector wins over a sibling one for the same type.
type CanceledStep struct {
	StepExecID string      `json:"stepExecId"`
	StepType   string      `json:"stepType"`
	Scope      CancelScope `json:"scope"`
}

// CancelInfo is what history keeps of a cancellation (E29): for
// STEP_CANCELED the scope that took the execution and its cause (with
// the RPC call's ID), for RPC_COMPLETED the step types the RPC
// cancelled (Steps).
type CancelInfo struct {
	Scope  CancelScope `json:"scope,omitempty"`
	Cause  string      `json:"cause,omitempty"`
	CallID string      `json:"callId,omitempty"`
	Steps  []string    `json:"steps,omitempty"`
}

// GetSteps returns c's Steps; nil for a nil c.
func (c *CancelInfo) GetSteps() []string {
	if c == nil {
		return nil
	}
	return c.Steps
}

// rpcCanceled is an RPC_COMPLETED event's CancelInfo, nil when the RPC
// cancelled nothing.
func rpcCanceled(steps []string) *CancelInfo {
	if len(steps) == 0 {
		return nil
	}
	return &CancelInfo{Steps: steps}
}

// CancelTask: a step execution whose attempt may be with a worker was
// cancelled, or its run closed; tell the worker running it, so that the
// handler's context ends (E38). Epoch is zero: the node names the task
// it handed out itself. A hint only: the attempt's result is refused
// either way.
type CancelTask struct {
	FlowID, RunID string
	StepExecID    string
	Method        Method
	Attempt       int
	Reason        string
}

// checkCancel validates a decision's or an RPC's cancellation selector:
// every type must be a declared step type (any non-empty name on a run
// without a definition).
func (d *decider) checkCancel(field string, sel *CancelSelector) error {
	if sel == nil {
		return nil
	}
	for _, l := range []struct {
		name  string
		types []string
	}{{"steps", sel.Steps}, {"siblings", sel.Siblings}} {
		for i, t := range l.types {
			if !d.stepDeclared(t) {
				return invalidArg(fmt.Sprintf("%s.%s[%d]", field, l.name, i), "step type %q is not declared by flow type %q", t, d.st.FlowType)
			}
		}
	}
	return nil
}

// cancelSteps cancels the active step executions sel selects, as one
// steps_canceled record; parent is the deciding execution's parent (for
// Siblings). It selects nothing that is absent or finished: the deciding
// execution itself has ended by then.
func (d *decider) cancelSteps(sel *CancelSelector, cause, callID, parent string) {
	if sel.IsZero() {
		return
	}
	var out []CanceledStep
	for _, s := range d.st.Steps {
		switch {
		case slices.Contains(sel.Steps, s.Type):
			out = append(out, CanceledStep{StepExecID: s.ID, StepType: s.Type, Scope: CancelFlowWide})
		case s.ParentID == parent && slices.Contains(sel.Siblings, s.Type):
			out = append(out, CanceledStep{StepExecID: s.ID, StepType: s.Type, Scope: CancelSiblings})
		}
	}
	if len(out) > 0 {
		d.emit(StepsCanceled{Cause: cause, CallID: callID, Steps: out})
	}
}

// applyCanceled applies a steps_canceled record.
func (st *FlowState) applyCanceled(rec Record, b StepsCanceled) []Effect {
	var eff []Effect
	for _, c := range b.Steps {
		s := st.Step(c.StepExecID)
		if s == nil {
			continue
		}
		st.event(rec, HistoryEvent{Type: EventStepCanceled, StepExecID: s.ID, StepType: s.Type,
			Canceled: &CancelInfo{Scope: c.Scope, Cause: b.Cause, CallID: b.CallID}})
		if e, ok := st.cancelTask(s, "step execution "+s.ID+" was canceled by "+b.Cause); ok {
			eff = append(eff, e)
		}
		st.removeStep(s.ID)
	}
	return eff
}

// cancelTask is the CancelTask effect for s's current attempt, if a worker
// may hold it: running, or pending (an ASYNC attempt is sent before its
// start is logged).
func (st *FlowState) cancelTask(s *StepExec, reason string) (CancelTask, bool) {
	if s.Phase == PhaseWaiting || s.Attempt.Number == 0 {
		return CancelTask{}, false
	}
	run := st.RunID
	if r := st.carriedRun(s); r != "" {
		run = r // handed out before a continue-as-new (E37)
	}
	return CancelTask{FlowID: st.FlowID, RunID: run, StepExecID: s.ID, Method: s.Attempt.Method,
		Attempt: s.Attempt.Number, Reason: reason}, true
}

// closedTasks are the CancelTask effects of a run that closes with step
// executions left.
func (st *FlowState) closedTasks(status Status) []Effect {
	var eff []Effect
	for _, s := range st.Steps {
		if e, ok := st.cancelTask(s, fmt.Sprintf("flow %s run %s closed %s", st.FlowID, st.RunID, status)); ok {
			eff = append(eff, e)
		}
	}
	return eff
}
