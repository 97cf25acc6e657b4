package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// SubFlowIDPrefix starts every subflow's flow ID (E31): the server derives
// the ID, a client cannot start a flow under it.
const SubFlowIDPrefix = "SubFlow:"

// SubFlowReuse decides what a subflow condition does when its derived
// child flow ID already has a run (E31).
type SubFlowReuse string

// Subflow reuse policies (E31).
const (
	// SubFlowRestartIfAbnormal (the default) attaches to a running or
	// completed child and starts a new run over a failed, canceled, timed
	// out or terminated one.
	SubFlowRestartIfAbnormal SubFlowReuse = "RESTART_IF_PREVIOUS_EXITS_ABNORMALLY"
	// SubFlowAttach attaches to a running child and takes a closed
	// child's result, whatever its status.
	SubFlowAttach SubFlowReuse = "ATTACH"
	// SubFlowAlwaysRestart terminates a running child and starts a new run.
	SubFlowAlwaysRestart SubFlowReuse = "ALWAYS_RESTART"
)

// SubFlowCondition is a Wait condition that starts a child flow and holds
// once that child has closed (E31). Start delay and a flow retry policy
// (E34) are not part of it yet.
type SubFlowCondition struct {
	FlowType string `json:"flowType"`
	// StartStep is optional: empty starts at the start step the child
	// type declares.
	StartStep     string           `json:"startStep,omitempty"`
	Input         Value            `json:"input,omitzero"`
	Timeout       time.Duration    `json:"timeout,omitempty"` // 0: none (E24)
	TimeoutPolicy TimeoutPolicy    `json:"timeoutPolicy,omitempty"`
	Attributes    []AttributeWrite `json:"attributes,omitempty"`
	Reuse         SubFlowReuse     `json:"reuse,omitempty"` // "" = RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
}

// StoredSubFlow is a subflow condition as stored: the condition, the child
// flow ID and start request ID the server derived, the child run it is
// linked to and, once the child closed, its result.
type StoredSubFlow struct {
	Spec SubFlowCondition `json:"spec"`
	// Index counts the Wait's subflow conditions from 0 in declaration
	// order.
	Index int `json:"index"`
	// FlowID is SubFlow:<parentFlowId>-<parentStepExecutionId>-<index>.
	FlowID string `json:"flowId"`
	// RequestID is the child start's request ID, unique to this parent
	// run, step execution and condition: a start decided again for it
	// (after a crash) always attaches.
	RequestID string `json:"requestId"`
	// RunID is the child run the condition follows, empty until the node
	// started it or attached to it.
	RunID string `json:"runId,omitempty"`
	// Result is the child run's result once it closed; nil while it
	// runs (and for a loser of an AnyOf, which keeps running).
	Result *Result `json:"result,omitempty"`
}

// ParentRef names the parent of a subflow: the run, step execution and
// subflow condition index whose Wait started it (E31).
type ParentRef struct {
	FlowID     string `json:"flowId"`
	RunID      string `json:"runId"`
	StepExecID string `json:"stepExecId"`
	Index      int    `json:"index"`
}

// SubFlowUpdate tells a parent about its child: the run the condition
// follows (ChildRunID) and, once the child closed, its Result (E31). The
// node submits it after it started or attached to the child
// (LinkSubFlows) and when a child closes (ParentNotice). It is
// idempotent: what the parent already knows decides no records. A
// condition already following another run of the child, a result for a
// condition whose Wait is already satisfied (an AnyOf loser), and an
// unknown child decide no records either.
type SubFlowUpdate struct {
	FlowID      string // the parent
	RunID       string // optional: the parent run
	ChildFlowID string
	ChildRunID  string
	Result      *Result // nil: the child runs
	// Notice: the child's own close notice (ParentNotice). It only
	// delivers a result to a condition already linked to that run; an
	// unlinked condition is left to LinkSubFlows, which applies the
	// reuse policy (the closing run may be one the policy would
	// replace).
	Notice bool
}

func (SubFlowUpdate) isCommand() {}

// SubFlowUpdated links a subflow condition to a child run and, with
// Result, satisfies it with the child's result (E31).
type SubFlowUpdated struct {
	StepExecID string  `json:"stepExecId"`
	Index      int     `json:"index"` // condition index in the Wait
	ChildRunID string  `json:"childRunId,omitempty"`
	Result     *Result `json:"result,omitempty"`
}

func (SubFlowUpdated) recordType() string { return "sub_flow_updated" }

// subFlowID derives a child's flow ID (E31).
func subFlowID(parentFlowID, stepExecID string, index int) string {
	return fmt.Sprintf("%s%s-%s-%d", SubFlowIDPrefix, parentFlowID, stepExecID, index)
}

// checkSubFlows validates the subflow conditions of a WaitFor's Wait.
func (d *decider) checkSubFlows(field string, w *Wait) error {
	if w.isEmpty() {
		return nil
	}
	for i, c := range w.Conditions {
		sf := c.SubFlow
		if sf == nil {
			continue
		}
		f := fmt.Sprintf("%s.conditions[%d].subFlow", field, i)
		switch {
		case sf.FlowType == "":
			return invalidArg(f+".flowType", "must not be empty")
		case sf.Timeout < 0:
			return invalidArg(f+".timeout", "must not be negative")
		}
		switch sf.TimeoutPolicy {
		case "", TimeoutFail, TimeoutCancel:
		default:
			return invalidArg(f+".timeoutPolicy", "unknown policy %q", sf.TimeoutPolicy)
		}
		switch sf.Reuse {
		case "", SubFlowRestartIfAbnormal, SubFlowAttach, SubFlowAlwaysRestart:
		default:
			return invalidArg(f+".reusePolicy", "unknown policy %q", sf.Reuse)
		}
		if err := d.checkValue(f+".input", sf.Input); err != nil {
			return err
		}
		for j, a := range sf.Attributes {
			if a.Name == "" {
				return invalidArg(fmt.Sprintf("%s.attributes[%d].name", f, j), "must not be empty")
			}
			if err := d.checkValue(fmt.Sprintf("%s.attributes[%d].value", f, j), a.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// subFlowBytes counts the values a Wait's subflow conditions carry (E28).
func subFlowBytes(w *Wait) int {
	n := 0
	if w == nil {
		return 0
	}
	for _, c := range w.Conditions {
		if c.SubFlow != nil {
			n += c.SubFlow.Input.Len() + attributeBytes(c.SubFlow.Attributes)
		}
	}
	return n
}

// deriveSubFlows names the children of a Wait stored by step s (E31).
func (d *decider) deriveSubFlows(w *StoredWait, s *StepExec) {
	for i := range w.Conditions {
		sf := w.Conditions[i].SubFlow
		if sf == nil {
			continue
		}
		if sf.Spec.Reuse == "" {
			sf.Spec.Reuse = SubFlowRestartIfAbnormal
		}
		sf.FlowID = subFlowID(d.st.FlowID, s.ID, sf.Index)
		sf.RequestID = fmt.Sprintf("%s%s/%s/%s/%d", SubFlowIDPrefix, d.st.FlowID, d.st.RunID, s.ID, sf.Index)
	}
}

// subFlowStart decides a StartFlow that a subflow condition asks for,
// against the child flow ID's latest run prev (E31). attach: no new run,
// the condition follows prev's. A retry of the same start (same request
// ID) always attaches.
func subFlowStart(prev *FlowState, c StartFlow) (attach bool) {
	if prev == nil {
		return false
	}
	if c.RequestID != "" && c.RequestID == prev.StartRequestID {
		return true
	}
	switch c.SubFlowReuse {
	case SubFlowAttach:
		return true
	case SubFlowAlwaysRestart:
		return false
	default:
		return prev.Running() || prev.Status == StatusCompleted
	}
}

// checkSubFlowStart checks a start's flow ID against the subflow rules: an
// ID with the subflow prefix only for a subflow start.
func checkSubFlowStart(c StartFlow) error {
	if c.Parent == nil && strings.HasPrefix(c.FlowID, SubFlowIDPrefix) {
		return invalidArg("flowId", "flow IDs starting with %q are derived by the server for subflows", SubFlowIDPrefix)
	}
	switch c.SubFlowReuse {
	case "", SubFlowRestartIfAbnormal, SubFlowAttach, SubFlowAlwaysRestart:
	default:
		return invalidArg("subFlowReuse", "unknown policy %q", c.SubFlowReuse)
	}
	return nil
}

// subFlowUpdate decides SubFlowUpdate on the parent (E31).
func (d *decider) subFlowUpdate(c SubFlowUpdate) error {
	if err := d.active(c.FlowID, c.RunID); err != nil {
		return err
	}
	if c.ChildFlowID == "" {
		return invalidArg("childFlowId", "must not be empty")
	}
	s, i := d.st.subFlowCondition(c.ChildFlowID)
	if s == nil {
		return nil
	}
	cond := &s.Wait.Conditions[i]
	sf := cond.SubFlow
	if sf.RunID != "" && !sameChain(sf.RunID, c.ChildRunID) {
		return nil // follows another run of the child
	}
	if sf.RunID == "" && c.Notice {
		return nil // not linked yet: LinkSubFlows decides
	}
	rec := SubFlowUpdated{StepExecID: s.ID, Index: i, ChildRunID: c.ChildRunID}
	link := sf.RunID == "" && c.ChildRunID != ""
	done := c.Result != nil && c.Result.Status != StatusRunning && !cond.Satisfied &&
		s.Phase == PhaseWaiting && !s.Wait.Done()
	if done {
		r := *c.Result
		rec.Result = &r
	}
	if !link && !done {
		return nil
	}
	d.emit(rec)
	d.evaluate()
	return nil
}

// subFlowCondition finds the condition of an active step execution's Wait
// that follows child flow ID id; a derived ID names at most one.
func (st *FlowState) subFlowCondition(id string) (*StepExec, int) {
	for _, s := range st.Steps {
		if s.Wait == nil {
			continue
		}
		for i, c := range s.Wait.Conditions {
			if c.SubFlow != nil && c.SubFlow.FlowID == id {
				return s, i
			}
		}
	}
	return nil, -1
}

// applySubFlowUpdated applies a SubFlowUpdated record.
func (st *FlowState) applySubFlowUpdated(rec Record, b SubFlowUpdated) {
	s := st.Step(b.StepExecID)
	if s == nil || s.Wait == nil || b.Index < 0 || b.Index >= len(s.Wait.Conditions) {
		return
	}
	c := &s.Wait.Conditions[b.Index]
	if c.SubFlow == nil {
		return
	}
	if b.ChildRunID != "" {
		c.SubFlow.RunID = b.ChildRunID
	}
	if b.Result != nil {
		c.SubFlow.Result = b.Result
		c.Satisfied = true
		st.event(rec, HistoryEvent{Type: EventSubFlowCompleted, StepExecID: s.ID, StepType: s.Type,
			SubFlow: &SubFlowEvent{Index: c.SubFlow.Index, ID: c.ID, Result: b.Result}})
	}
}

// SubFlowEvent is what a SUB_FLOW_COMPLETED history event keeps: the
// condition (its index among the Wait's subflow conditions, its ID) and
// the child's result.
type SubFlowEvent struct {
	Index  int     `json:"index"`
	ID     string  `json:"id,omitempty"`
	Result *Result `json:"result"`
}

// SubFlowRef names one subflow condition of a running parent that the
// node still has to act on (PendingSubFlows).
type SubFlowRef struct {
	ParentFlowID, ParentRunID, StepExecID string
	CondIndex                             int
	SubFlow                               StoredSubFlow
	// WaitDone: the Wait is satisfied; a result is no longer taken.
	WaitDone bool
}

// PendingSubFlows returns the subflow conditions of a running run that
// the node must act on: those not linked to a child run yet (their child
// is to be started or attached, also when the Wait is already satisfied:
// every subflow condition starts its child), and those linked whose Wait
// still waits (their child's result is to be delivered if it closed).
// Nil for a run that has none: flows without subflows pay nothing.
func (st *FlowState) PendingSubFlows() []SubFlowRef {
	if !st.Running() {
		return nil
	}
	var out []SubFlowRef
	for _, s := range st.Steps {
		if s.Wait == nil {
			continue
		}
		done := s.Phase != PhaseWaiting || s.Wait.Done()
		for i, c := range s.Wait.Conditions {
			if c.SubFlow == nil || c.Satisfied || (c.SubFlow.RunID != "" && done) {
				continue
			}
			out = append(out, SubFlowRef{ParentFlowID: st.FlowID, ParentRunID: st.RunID, StepExecID: s.ID,
				CondIndex: i, SubFlow: *c.SubFlow, WaitDone: done})
		}
	}
	return out
}

// HasSubFlows reports whether a record may need the node's cross-flow
// step: a Wait with a subflow condition was stored, or a child closed.
func HasSubFlows(st *FlowState, recs []Record) bool {
	for _, r := range recs {
		switch b := r.Body.(type) {
		case WaitForCompleted:
			if b.Wait != nil {
				for _, c := range b.Wait.Conditions {
					if c.SubFlow != nil {
						return true
					}
				}
			}
		case FlowClosed:
			if st != nil && st.Parent != nil {
				return true
			}
		}
	}
	return false
}

// ChildStart is the StartFlow a pending subflow condition asks for; the
// node sets RunID and, from its registry, the definition and config.
func (r SubFlowRef) ChildStart() StartFlow {
	sp := r.SubFlow.Spec
	return StartFlow{
		FlowID: r.SubFlow.FlowID, FlowType: sp.FlowType, RequestID: r.SubFlow.RequestID,
		StartStep: sp.StartStep, Input: sp.Input, Timeout: sp.Timeout, TimeoutPolicy: sp.TimeoutPolicy,
		Attributes: sp.Attributes, SubFlowReuse: sp.Reuse,
		Parent: &ParentRef{FlowID: r.ParentFlowID, RunID: r.ParentRunID, StepExecID: r.StepExecID, Index: r.SubFlow.Index},
	}
}

// ParentNotice returns the update a closed subflow run sends its parent
// (E31); ok is false for a run that is no subflow or still runs.
func (st *FlowState) ParentNotice() (SubFlowUpdate, bool) {
	if st == nil || st.Parent == nil {
		return SubFlowUpdate{}, false
	}
	r, ok := st.Result()
	if !ok {
		return SubFlowUpdate{}, false
	}
	return SubFlowUpdate{FlowID: st.Parent.FlowID, ChildFlowID: st.FlowID, ChildRunID: st.RunID, Result: &r, Notice: true}, true
}

// SubFlowHost is what LinkSubFlows needs of the node: reads of head
// states and deciding (and logging) commands, each on its own flow.
type SubFlowHost interface {
	// Flow returns the latest run of flowID (nil: none).
	Flow(flowID string) (*FlowState, error)
	// Run returns run runID of flowID (nil: unknown).
	Run(flowID, runID string) (*FlowState, error)
	// Decide decides cmd on flowID's latest run and logs the records.
	// StartFlow commands get their RunID, definition and config here.
	Decide(flowID string, cmd Command) error
}

// LinkSubFlows performs the node's cross-flow step for the parent flow
// parentID (E31; see "SubFlows" in the package documentation): every
// subflow condition not yet linked starts or attaches to its child and is
// linked to the child's run (with its result when that run is closed); a
// linked condition still waiting takes the result of a closed child. Each
// step is a command decided on one flow, in order, so the log holds the
// parent's Wait before the child's start, and the child's start before
// the link. Everything is idempotent: after a crash, running it again for
// every running flow (Recover) completes what the log misses.
func LinkSubFlows(h SubFlowHost, parentID string) error {
	p, err := h.Flow(parentID)
	if err != nil {
		return err
	}
	for _, ref := range p.PendingSubFlows() {
		sf := ref.SubFlow
		upd := SubFlowUpdate{FlowID: ref.ParentFlowID, RunID: ref.ParentRunID, ChildFlowID: sf.FlowID}
		var child *FlowState
		if sf.RunID == "" {
			err := h.Decide(sf.FlowID, ref.ChildStart())
			var e *Error
			if errors.As(err, &e) {
				// The child's start is invalid (its definition refuses the
				// input, an undeclared attribute): the condition holds with
				// a failed result, and the parent's Execute decides.
				upd.Result = &Result{Summary: Summary{FlowID: sf.FlowID, FlowType: sf.Spec.FlowType, Status: StatusFailed,
					ParentFlowID: ref.ParentFlowID}, ErrorType: ErrInvalidUserFlowCode,
					Message: "subflow did not start: " + e.Error()}
				if err := h.Decide(ref.ParentFlowID, upd); err != nil && !isRefusal(err) {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if child, err = h.Flow(sf.FlowID); err != nil {
				return err
			}
		} else if child, err = h.Run(sf.FlowID, sf.RunID); err != nil {
			return err
		}
		// A child that continued as new (E37) goes on in its latest run.
		for child != nil && child.ContinuedRunID() != "" {
			if child, err = h.Run(sf.FlowID, child.ContinuedRunID()); err != nil {
				return err
			}
		}
		if child == nil {
			continue
		}
		upd.ChildRunID = child.RunID
		if r, ok := child.Result(); ok {
			upd.Result = &r
		}
		if err := h.Decide(ref.ParentFlowID, upd); err != nil && !isRefusal(err) {
			return err
		}
	}
	return nil
}

// isRefusal reports whether err is the engine refusing a command (as
// opposed to the node failing to decide or log it).
func isRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
