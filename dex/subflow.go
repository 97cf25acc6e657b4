package dex

import (
	"fmt"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// SubFlowType is a flow used as a subflow, typed: In is the input of its
// start step, Out the type of its output. Declare it once, at package
// level, with SubFlow:
//
//	var Payment = dex.SubFlow[Charge, Order, Receipt](PaymentFlow)
//
// A WaitFor then waits for one or more children, alone or combined with
// timers and channels under Until, AllOf and AnyOf:
//
//	return dex.AllOf(Payment.Start(o).WithID("pay"), dex.Timer(time.Hour)), nil
//
// and its Execute reads each child's typed result:
//
//	res, ok := Payment.ResultOf(r, "pay")
//	receipt, err := res.Output()
type SubFlowType[In, Out any] struct {
	flow  *Flow
	start string
}

// SubFlow declares flow as a subflow whose start step is S, taking In,
// and whose output is an Out. An input of another type than S's does not
// compile; a flow whose start step is not S makes every condition of it
// fail the WaitFor attempt with an error naming both.
func SubFlow[S StepWithInput[In], In, Out any](flow *Flow) SubFlowType[In, Out] {
	return SubFlowType[In, Out]{flow: flow, start: stepNameFor[S]()}
}

// Name is the subflow's flow type.
func (t SubFlowType[In, Out]) Name() string {
	if t.flow == nil {
		return ""
	}
	return t.flow.name
}

// Start is a condition that starts a child of this flow type with in and
// holds once the child has closed, whatever its status. The server
// derives the child's flow ID from the parent's flow ID, the step
// execution and the condition's index among the Wait's subflow
// conditions: SubFlow:<parentFlowId>-<stepExecutionId>-<index>.
func (t SubFlowType[In, Out]) Start(in In) SubFlowCondition[Out] {
	c := SubFlowCondition[Out]{flowType: t.Name(), start: t.start}
	switch {
	case t.flow == nil:
		c.err = fmt.Errorf("subflow: nil flow")
	case t.flow.start != t.start:
		c.err = fmt.Errorf("subflow %q: step %q is not its start step (%q)", t.flow.name, t.start, t.flow.start)
	}
	c.input, c.inErr = encodeValue(in)
	return c
}

// Results returns the result of every subflow condition of this flow type
// in the Wait, in declaration order.
func (t SubFlowType[In, Out]) Results(r Results) []SubFlowResult[Out] {
	var out []SubFlowResult[Out]
	for _, sr := range r.pb.GetSubFlows() {
		if sr.GetResult().GetFlowType() == t.Name() {
			out = append(out, subFlowResultOf[Out](sr))
		}
	}
	return out
}

// ResultOf returns the result of the subflow condition with ID id, and
// whether the Wait had one.
func (t SubFlowType[In, Out]) ResultOf(r Results, id string) (SubFlowResult[Out], bool) {
	for _, sr := range r.pb.GetSubFlows() {
		if sr.GetConditionId() == id {
			return subFlowResultOf[Out](sr), true
		}
	}
	return SubFlowResult[Out]{}, false
}

// SubFlowReusePolicy says what a subflow condition does when its derived
// child flow ID already has a run (the parent's flow ID was reused).
type SubFlowReusePolicy int32

// The subflow reuse policies. A retry of the same start always attaches.
const (
	// SubFlowRestartIfPreviousExitsAbnormally (the default) attaches to a
	// running or completed child and starts a new run over a failed,
	// canceled, timed-out or terminated one.
	SubFlowRestartIfPreviousExitsAbnormally SubFlowReusePolicy = 1
	// SubFlowAttach attaches to a running child and takes a closed
	// child's result, whatever its status.
	SubFlowAttach SubFlowReusePolicy = 2
	// SubFlowAlwaysRestart terminates a running child and starts anew.
	SubFlowAlwaysRestart SubFlowReusePolicy = 3
)

func (p SubFlowReusePolicy) String() string { return dexpb.SubFlowReusePolicy(p).String() }

// SubFlowCondition starts a child flow and holds once it closed. Out is
// the child's output type.
type SubFlowCondition[Out any] struct {
	id, flowType, start string
	input               *dexpb.EncodedValue
	inErr, err          error
	timeout             time.Duration
	timeoutPolicy       FlowTimeoutPolicy
	attrs               []AttributeValue
	reuse               SubFlowReusePolicy
}

// WithID names the condition, for ResultOf; IDs must be unique within a
// Wait.
func (c SubFlowCondition[Out]) WithID(id string) SubFlowCondition[Out] {
	c.id = id
	return c
}

// ID is the condition's ID, empty when it has none.
func (c SubFlowCondition[Out]) ID() string { return c.id }

// WithFlowTimeout sets the child's flow timeout and its policy.
func (c SubFlowCondition[Out]) WithFlowTimeout(d time.Duration, p FlowTimeoutPolicy) SubFlowCondition[Out] {
	c.timeout, c.timeoutPolicy = d, p
	return c
}

// WithAttributes sets the child's initial attributes.
func (c SubFlowCondition[Out]) WithAttributes(vals ...AttributeValue) SubFlowCondition[Out] {
	c.attrs = append(c.attrs[:len(c.attrs):len(c.attrs)], vals...)
	return c
}

// WithReusePolicy sets what happens when the derived child ID already has
// a run.
func (c SubFlowCondition[Out]) WithReusePolicy(p SubFlowReusePolicy) SubFlowCondition[Out] {
	c.reuse = p
	return c
}

func (c SubFlowCondition[Out]) waitProto() (*dexpb.Wait, error) { return untilProto(c) }

func (c SubFlowCondition[Out]) conditionProto() (*dexpb.WaitCondition, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.inErr != nil {
		return nil, fmt.Errorf("subflow %q input: %w", c.flowType, c.inErr)
	}
	if c.timeout < 0 {
		return nil, fmt.Errorf("subflow %q: negative flow timeout %s", c.flowType, c.timeout)
	}
	attrs, err := attributesProto(c.attrs)
	if err != nil {
		return nil, fmt.Errorf("subflow %q: %w", c.flowType, err)
	}
	sf := &dexpb.SubFlowCondition{FlowType: c.flowType, StartStep: c.start, Input: c.input,
		FlowTimeoutPolicy: dexpb.FlowTimeoutPolicy(c.timeoutPolicy), InitialAttributes: attrs,
		ReusePolicy: dexpb.SubFlowReusePolicy(c.reuse)}
	if c.timeout > 0 {
		sf.FlowTimeout = durationpb.New(c.timeout)
	}
	return &dexpb.WaitCondition{Id: c.id, Condition: &dexpb.WaitCondition_SubFlow{SubFlow: sf}}, nil
}

// SubFlowResult is what Execute learns of one subflow condition: the
// child's FlowResult, final when the condition is Satisfied, else a
// snapshot with Status StatusRunning (a child that did not win an AnyOf
// keeps running; stop it with Client.StopFlow and its FlowID).
type SubFlowResult[Out any] struct {
	*FlowResult
	// ConditionID is the condition's ID, Index its position among the
	// Wait's subflow conditions.
	ConditionID string
	Index       int
	// Satisfied is true when the child closed before the Wait held.
	Satisfied bool
}

// Output decodes the child's last output as an Out. It is ErrNoValue for
// a child that gave none (still running, or closed without an output).
func (r SubFlowResult[Out]) Output() (Out, error) {
	if r.FlowResult == nil {
		var zero Out
		return zero, ErrNoValue
	}
	return Output[Out](r.FlowResult)
}

func subFlowResultOf[Out any](p *dexpb.SubFlowResult) SubFlowResult[Out] {
	return SubFlowResult[Out]{FlowResult: flowResultOf(p.GetResult()), ConditionID: p.GetConditionId(),
		Index: int(p.GetSubFlowConditionIndex()), Satisfied: p.GetSatisfied()}
}

// SubFlowState is one subflow condition of a waiting step, as
// GetFlowState shows it.
type SubFlowState struct {
	ConditionID string
	Index       int
	// FlowType and FlowID name the child; RunID is the run the condition
	// follows, empty until the server started or attached to it.
	FlowType, FlowID, RunID string
	// Status is the child's status as the condition knows it: final once
	// Satisfied, else StatusRunning (0 before the child started).
	Status      FlowStatus
	Satisfied   bool
	ReusePolicy SubFlowReusePolicy
}

func subFlowStatesOf(ps []*dexpb.SubFlowConditionState) []SubFlowState {
	var out []SubFlowState
	for _, p := range ps {
		out = append(out, SubFlowState{ConditionID: p.GetConditionId(), Index: int(p.GetSubFlowConditionIndex()),
			FlowType: p.GetFlowType(), FlowID: p.GetFlowId(), RunID: p.GetRunId(), Status: FlowStatus(p.GetStatus()),
			Satisfied: p.GetSatisfied(), ReusePolicy: SubFlowReusePolicy(p.GetReusePolicy())})
	}
	return out
}
