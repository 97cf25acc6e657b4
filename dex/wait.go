package dex

import (
	"fmt"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Wait is what a WaitFor returns: the conditions that must hold before the
// step's Execute runs. Build one with Until, AllOf, AnyOf or
// AnyCombinationOf; a
// single Condition is a Wait too (Until of it). A nil Wait is satisfied at
// once: Execute runs right after the WaitFor, with empty Results.
type Wait interface {
	waitProto() (*dexpb.Wait, error)
}

// Condition is one timer or channel condition: a TimerCondition or a
// ChannelCondition.
type Condition interface {
	Wait
	conditionProto() (*dexpb.WaitCondition, error)
}

// TimerCondition is a durable timer. Its duration counts from the
// moment the server stores the Wait.
type TimerCondition struct {
	id string
	d  time.Duration
}

// Timer is a durable timer that fires d after the Wait is stored.
func Timer(d time.Duration) TimerCondition { return TimerCondition{d: d} }

// WithID names the timer, so that Execute (Results.TimerFired with
// TimerID) and SkipTimer can refer to it. IDs must be unique within a Wait.
func (t TimerCondition) WithID(id string) TimerCondition {
	t.id = id
	return t
}

// ID is the timer's ID, empty when it has none.
func (t TimerCondition) ID() string { return t.id }

func (t TimerCondition) waitProto() (*dexpb.Wait, error) { return untilProto(t) }

func (t TimerCondition) conditionProto() (*dexpb.WaitCondition, error) {
	if t.d < 0 {
		return nil, fmt.Errorf("timer %q: negative duration %s", t.id, t.d)
	}
	return &dexpb.WaitCondition{Id: t.id, Condition: &dexpb.WaitCondition_Timer{
		Timer: &dexpb.TimerCondition{Duration: durationpb.New(t.d)},
	}}, nil
}

// Until waits for one condition.
func Until(c Condition) Wait { return combined{kind: "until", conds: []Condition{c}} }

// AllOf waits until every condition holds; each channel condition then
// consumes its messages. An empty AllOf is satisfied at once.
func AllOf(conds ...Condition) Wait { return combined{kind: "allOf", conds: conds} }

// AnyOf waits until one condition holds; only the winner consumes messages.
// It needs at least one condition.
func AnyOf(conds ...Condition) Wait { return combined{kind: "anyOf", conds: conds} }

type combined struct {
	kind  string
	conds []Condition
}

func (c combined) waitProto() (*dexpb.Wait, error) {
	conds := make([]*dexpb.WaitCondition, 0, len(c.conds))
	ids := map[string]bool{}
	for i, cond := range c.conds {
		if cond == nil {
			return nil, fmt.Errorf("%s: condition %d is nil", c.kind, i)
		}
		pc, err := cond.conditionProto()
		if err != nil {
			return nil, err
		}
		if id := pc.GetId(); id != "" {
			if ids[id] {
				return nil, fmt.Errorf("%s: condition ID %q is used twice", c.kind, id)
			}
			ids[id] = true
		}
		conds = append(conds, pc)
	}
	switch c.kind {
	case "until":
		return &dexpb.Wait{Kind: &dexpb.Wait_Until{Until: conds[0]}}, nil
	case "allOf":
		return &dexpb.Wait{Kind: &dexpb.Wait_AllOf{AllOf: &dexpb.WaitConditions{Conditions: conds}}}, nil
	default:
		if len(conds) == 0 {
			return nil, fmt.Errorf("anyOf: no conditions")
		}
		return &dexpb.Wait{Kind: &dexpb.Wait_AnyOf{AnyOf: &dexpb.WaitConditions{Conditions: conds}}}, nil
	}
}

func untilProto(c Condition) (*dexpb.Wait, error) { return Until(c).waitProto() }

// waitToProto converts a handler's Wait; nil is the empty Wait.
func waitToProto(w Wait) (*dexpb.Wait, error) {
	if w == nil {
		return &dexpb.Wait{}, nil
	}
	return w.waitProto()
}

// Results is what Execute learns about its satisfied Wait: which
// timers fired (TimerFired), which messages each channel's conditions
// consumed (Channel.Received, Channel.Messages), which condition of an AnyOf
// won (ChannelCondition.Satisfied), or that the WaitFor failed
// (WaitForError).
//
// Timers are indexed from 0 in declaration order, counting timer conditions
// only.
type Results struct {
	pb      *dexpb.ConditionResults
	failure *dexpb.AttemptFailure
	failed  bool
	st      *handlerState // collects decode errors; nil outside a task
}

// TimerFired reports whether the timer t selects (TimerID or TimerIndex)
// fired, or was skipped, by the time the Wait was satisfied.
func (r Results) TimerFired(t TimerRef) bool { return r.timer(t).GetFired() }

// TimerSkipped reports whether the timer t selects fired because a client
// called SkipTimer.
func (r Results) TimerSkipped(t TimerRef) bool { return r.timer(t).GetSkipped() }

func (r Results) timer(t TimerRef) *dexpb.TimerResult {
	for _, tr := range r.pb.GetTimers() {
		if (t.id != "" && tr.GetConditionId() == t.id) || (t.id == "" && int(tr.GetTimerIndex()) == t.index) {
			return tr
		}
	}
	return nil
}

// WaitForError is nil unless the step's WaitFor exhausted its retries and the
// step's WaitForFailure policy is WaitForProceed; then it is an
// *AttemptFailure with the WaitFor's last error, and there are no condition
// results.
func (r Results) WaitForError() error {
	if !r.failed {
		return nil
	}
	return attemptFailureOf(r.failure)
}

// AttemptFailure describes a failed attempt as the server recorded it.
type AttemptFailure struct {
	// Method is KindWaitFor or KindExecute.
	Method TaskKind
	// Attempt is the failed attempt's number.
	Attempt int
	// Kind says why it failed (worker error, timeout, ...).
	Kind AttemptFailureKind
	// Type, Message and Stack are the worker's error type, message and
	// stack for a worker error, or the server's explanation.
	Type, Message, Stack string
	// Time is when the server recorded the failure.
	Time time.Time
}

func (f *AttemptFailure) Error() string {
	if f.Type != "" {
		return fmt.Sprintf("attempt %d failed (%s): %s: %s", f.Attempt, f.Kind, f.Type, f.Message)
	}
	return fmt.Sprintf("attempt %d failed (%s): %s", f.Attempt, f.Kind, f.Message)
}

func attemptFailureOf(p *dexpb.AttemptFailure) *AttemptFailure {
	if p == nil {
		return &AttemptFailure{Message: "WaitFor failed"}
	}
	f := &AttemptFailure{
		Method:  TaskKind(p.GetMethod()),
		Attempt: int(p.GetAttempt()),
		Kind:    AttemptFailureKind(p.GetKind()),
		Type:    p.GetErrorType(),
		Message: p.GetMessage(),
		Stack:   p.GetStack(),
	}
	if p.GetTime() != nil {
		f.Time = p.GetTime().AsTime()
	}
	return f
}

// AnyCombinationOf waits until every condition of one of its groups holds
// (an OR of ANDs, E32). Each group is an AllOf (or a single Condition):
//
//	dex.AnyCombinationOf(
//		dex.AllOf(Approve.ForOne().WithID("approve"), Review.ForOne().WithID("review")),
//		dex.AllOf(Approve.ForOne().WithID("approve"), dex.Timer(time.Hour).WithID("late")),
//	)
//
// Every condition needs an ID, unique within the Wait; a condition may be
// in several groups (give it the same ID there: a different condition
// under an ID already used is an error). Groups are tried in declared
// order; channel conditions consume nothing until their whole group can
// hold, and when several conditions of the winning group read one channel
// their minimum counts are reserved first, then the extra capacity goes to
// them in declaration order, so a message never goes to two conditions.
// Results.WinningGroup tells which group held.
func AnyCombinationOf(groups ...Wait) Wait { return combination{groups: groups} }

type combination struct{ groups []Wait }

func (c combination) waitProto() (*dexpb.Wait, error) {
	if len(c.groups) == 0 {
		return nil, fmt.Errorf("anyCombinationOf: no groups")
	}
	wc := &dexpb.WaitCombinations{}
	byID := map[string]*dexpb.WaitCondition{}
	for g, group := range c.groups {
		var conds []Condition
		switch w := group.(type) {
		case combined:
			if w.kind != "allOf" {
				return nil, fmt.Errorf("anyCombinationOf: group %d is an %s; a group is an AllOf or one condition", g, w.kind)
			}
			conds = w.conds
		case Condition:
			conds = []Condition{w}
		default:
			return nil, fmt.Errorf("anyCombinationOf: group %d is not an AllOf or a condition", g)
		}
		if len(conds) == 0 {
			return nil, fmt.Errorf("anyCombinationOf: group %d has no conditions", g)
		}
		ids := make([]string, 0, len(conds))
		for i, cond := range conds {
			if cond == nil {
				return nil, fmt.Errorf("anyCombinationOf: group %d: condition %d is nil", g, i)
			}
			pc, err := cond.conditionProto()
			if err != nil {
				return nil, err
			}
			id := pc.GetId()
			if id == "" {
				return nil, fmt.Errorf("anyCombinationOf: group %d: condition %d has no ID (use WithID)", g, i)
			}
			if prev, ok := byID[id]; ok {
				if !proto.Equal(prev, pc) {
					return nil, fmt.Errorf("anyCombinationOf: group %d: condition ID %q is used by two different conditions", g, id)
				}
			} else {
				byID[id] = pc
				wc.Conditions = append(wc.Conditions, pc)
			}
			ids = append(ids, id)
		}
		wc.Groups = append(wc.Groups, &dexpb.ConditionGroup{ConditionIds: ids})
	}
	return &dexpb.Wait{Kind: &dexpb.Wait_AnyCombinationOf{AnyCombinationOf: wc}}, nil
}

// WinningGroup returns the index (from 0, in declared order) of the
// AnyCombinationOf group that held; false for other Waits.
func (r Results) WinningGroup() (int, bool) {
	if r.pb == nil || r.pb.WinningGroup == nil {
		return 0, false
	}
	return int(r.pb.GetWinningGroup()), true
}
