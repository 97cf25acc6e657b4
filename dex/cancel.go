package dex

import (
	"errors"
	"fmt"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Cancel selects step executions to cancel (E29). Build it with
// CancelSteps or CancelSiblingSteps and attach it to a decision with
// AndCancel, or stage it from an RPC handler with ScheduleCancel.
type Cancel struct {
	steps    []string
	siblings bool
}

// CancelSteps cancels every queued, waiting or running execution of the
// given step types in the flow, when the decision commits:
//
//	return dex.AndCancel(dex.GracefulComplete(quote), dex.CancelSteps(dex.Ref[Timeout]())), nil
//
// Executions the same decision schedules are not affected; finished or
// absent ones are no-ops. A cancelled execution never proceeds: its late
// result, writes and decision are discarded, its failure policy and
// recovery step do not run, a waiting one is removed with its timers,
// and a running handler's context ends (context.Cause is
// ErrTaskCanceled).
func CancelSteps(steps ...StepRef) Cancel { return Cancel{steps: refNames(steps)} }

// CancelSiblingSteps cancels the executions of the given step types that
// were scheduled by the same execution as the deciding one (its
// siblings), as CancelSteps does. A type also given to CancelSteps is
// cancelled flow-wide.
func CancelSiblingSteps(steps ...StepRef) Cancel {
	return Cancel{steps: refNames(steps), siblings: true}
}

func refNames(refs []StepRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.name
	}
	return out
}

// AndCancel returns decision d with the cancellations cs, which apply when
// d commits, before the executions d moves to are created. Any decision
// may cancel: a winner of a race completing gracefully, a step moving on.
func AndCancel(d Decision, cs ...Cancel) Decision { return cancelDecision{d: d, cs: cs} }

type cancelDecision struct {
	d  Decision
	cs []Cancel
}

func (c cancelDecision) movements() []Movement {
	if c.d == nil {
		return nil
	}
	return c.d.movements()
}

func (c cancelDecision) cancels() []Cancel { return c.cs }

func (c cancelDecision) decisionProto() (*dexpb.StepDecision, error) {
	if c.d == nil {
		return nil, errors.New("dex.AndCancel of a nil Decision")
	}
	pd, err := c.d.decisionProto()
	if err != nil {
		return nil, err
	}
	for _, x := range c.cs {
		if x.siblings {
			pd.CancelSiblingStepTypes = append(pd.CancelSiblingStepTypes, x.steps...)
		} else {
			pd.CancelStepTypes = append(pd.CancelStepTypes, x.steps...)
		}
	}
	return pd, nil
}

// cancelsOf returns the cancellations a decision carries.
func cancelsOf(d Decision) []Cancel {
	if c, ok := d.(interface{ cancels() []Cancel }); ok {
		return c.cancels()
	}
	return nil
}

// ScheduleCancel stages flow-wide cancellations from an RPC handler: they
// apply when the RPC's result commits, before its movements (Schedule)
// are created. An RPC has no siblings: CancelSiblingSteps fails the call,
// and so does calling ScheduleCancel from a step handler (a step cancels
// with AndCancel).
func ScheduleCancel(ctx Context, cs ...Cancel) {
	st := ctx.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.kind != KindRPC {
		st.fail(&invalidResultError{errors.New("dex.ScheduleCancel is for RPC handlers; a step cancels with dex.AndCancel")})
		return
	}
	for _, c := range cs {
		if c.siblings {
			st.fail(&invalidResultError{errors.New("dex.ScheduleCancel: an RPC has no siblings to cancel (use dex.CancelSteps)")})
			return
		}
		st.cancels = append(st.cancels, c.steps...)
	}
}

// checkCancels checks that every step type a cancellation names is
// declared by the flow.
func (f *flowDef) checkCancels(cs []Cancel) error {
	for _, c := range cs {
		for _, s := range c.steps {
			if s == "" {
				return errors.New("cancel of the zero StepRef (use dex.Ref)")
			}
			if f.steps[s] == nil {
				return fmt.Errorf("cancel of step %q, which flow %q does not declare", s, f.name)
			}
		}
	}
	return nil
}
