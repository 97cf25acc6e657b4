package dex

import (
	"fmt"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Decision is what a step's Execute returns: movements (Move) or
// one of the close decisions (GracefulComplete, ForceComplete, ForceFail,
// DeadEnd). A nil Decision fails the attempt.
type Decision interface {
	decisionProto() (*dexpb.StepDecision, error)
	movements() []Movement
}

// Movement schedules one step execution: a step type, its input and optional
// per-movement options. Build it with To.
type Movement struct {
	step        string
	input       *dexpb.EncodedValue
	err         error
	opts        *StepOptions
	skipWaitFor bool
}

// To is a movement to step S with input in. The compiler checks that in is
// S's input type: S must embed dex.Step[T] for the T of in.
func To[S StepWithInput[T], T any](in T) Movement {
	ev, err := encodeValue(in)
	return Movement{step: stepNameFor[S](), input: ev, err: err}
}

// WithOptions overrides the step's options for this step execution only
// (the first of the levels options resolve through: the movement, the
// step, the flow's defaults, the server's defaults).
func (m Movement) WithOptions(o StepOptions) Movement {
	m.opts = &o
	return m
}

// SkipWaitFor runs the step's Execute at once, without its WaitFor.
func (m Movement) SkipWaitFor() Movement {
	m.skipWaitFor = true
	return m
}

// StepType is the target step's type.
func (m Movement) StepType() string { return m.step }

func (m Movement) proto() (*dexpb.Movement, error) {
	if m.err != nil {
		return nil, fmt.Errorf("movement to %q: %w", m.step, m.err)
	}
	if m.step == "" {
		return nil, fmt.Errorf("movement without a step (use dex.To)")
	}
	pm := &dexpb.Movement{StepType: m.step, Input: m.input, SkipWaitFor: m.skipWaitFor}
	if m.opts != nil {
		pm.Options = m.opts.proto()
	}
	return pm, nil
}

func movementsProto(ms []Movement) ([]*dexpb.Movement, error) {
	out := make([]*dexpb.Movement, 0, len(ms))
	for _, m := range ms {
		pm, err := m.proto()
		if err != nil {
			return nil, err
		}
		out = append(out, pm)
	}
	return out, nil
}

// Move moves the flow on to one or more step executions:
//
//	return dex.Move(dex.To[Charge](order)), nil
//
// Several movements run in parallel; their order decides their step
// execution IDs.
func Move(ms ...Movement) Decision { return moveDecision{ms: ms} }

type moveDecision struct{ ms []Movement }

func (d moveDecision) movements() []Movement { return d.ms }

func (d moveDecision) decisionProto() (*dexpb.StepDecision, error) {
	if len(d.ms) == 0 {
		return nil, fmt.Errorf("dex.Move without movements (use dex.DeadEnd to end a branch)")
	}
	ms, err := movementsProto(d.ms)
	if err != nil {
		return nil, err
	}
	return &dexpb.StepDecision{Decision: &dexpb.StepDecision_Movements{Movements: &dexpb.Movements{Movements: ms}}}, nil
}

// GracefulComplete ends this branch; the flow completes with output when no
// other step execution runs. A nil output records none.
func GracefulComplete(output any) Decision {
	ev, err := encodeAny(output)
	return closeDecision{d: &dexpb.StepDecision{Decision: &dexpb.StepDecision_GracefulComplete{
		GracefulComplete: &dexpb.GracefulComplete{Output: ev},
	}}, err: err}
}

// ForceComplete completes the flow now with output and abandons every other
// step execution.
func ForceComplete(output any) Decision {
	ev, err := encodeAny(output)
	return closeDecision{d: &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceComplete{
		ForceComplete: &dexpb.ForceComplete{Output: ev},
	}}, err: err}
}

// ForceFail fails the flow now with STEP_DECISION_FAILING_FLOW and reason
// as its message.
func ForceFail(reason string) Decision {
	return closeDecision{d: &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceFail{
		ForceFail: &dexpb.ForceFail{Reason: reason},
	}}}
}

// DeadEnd ends this branch and leaves the flow open (RPCs may move it on).
func DeadEnd() Decision {
	return closeDecision{d: &dexpb.StepDecision{Decision: &dexpb.StepDecision_DeadEnd{DeadEnd: &dexpb.DeadEnd{}}}}
}

type closeDecision struct {
	d   *dexpb.StepDecision
	err error
}

func (closeDecision) movements() []Movement { return nil }

func (d closeDecision) decisionProto() (*dexpb.StepDecision, error) {
	if d.err != nil {
		return nil, fmt.Errorf("encode output: %w", d.err)
	}
	return d.d, nil
}

// StepRef names a step type, for StepOptions.Recovery and MovesTo. Build it
// with Ref.
type StepRef struct{ name string }

// Ref refers to step S.
func Ref[S StepType]() StepRef { return StepRef{name: stepNameFor[S]()} }

// Name is the step type's name ("" for the zero StepRef).
func (r StepRef) Name() string { return r.name }

// ForceCompleteIfChannelsEmpty completes the flow with output if every
// channel of channels is empty when the decision commits, and otherwise
// follows the fallback movements (at least one) (E32). The server decides
// it atomically against the committed queues, so a message published
// concurrently is never lost: either the flow completes first (the
// publish then fails with ErrFailedPrecondition: the flow is closed) or the fallback runs and can
// consume it:
//
//	return dex.ForceCompleteIfChannelsEmpty(total, []dex.ChannelDef{Items}, dex.To[Drain](total)), nil
func ForceCompleteIfChannelsEmpty(output any, channels []ChannelDef, fallback ...Movement) Decision {
	ev, err := encodeAny(output)
	names := make([]string, len(channels))
	for i, c := range channels {
		names[i] = c.Name()
	}
	return closeIfEmptyDecision{output: ev, err: err, channels: names, fallback: fallback}
}

type closeIfEmptyDecision struct {
	output   *dexpb.EncodedValue
	err      error
	channels []string
	fallback []Movement
}

func (d closeIfEmptyDecision) movements() []Movement { return d.fallback }

func (d closeIfEmptyDecision) decisionProto() (*dexpb.StepDecision, error) {
	switch {
	case d.err != nil:
		return nil, fmt.Errorf("encode output: %w", d.err)
	case len(d.channels) == 0:
		return nil, fmt.Errorf("dex.ForceCompleteIfChannelsEmpty without channels")
	case len(d.fallback) == 0:
		return nil, fmt.Errorf("dex.ForceCompleteIfChannelsEmpty without a fallback movement")
	}
	ms, err := movementsProto(d.fallback)
	if err != nil {
		return nil, err
	}
	return &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceCompleteIfChannelsEmpty{
		ForceCompleteIfChannelsEmpty: &dexpb.ForceCompleteIfChannelsEmpty{Output: d.output, Channels: d.channels, Fallback: ms},
	}}, nil
}
