package engine

import (
	"errors"
	"fmt"
	"time"
)

// Engine decides: it turns commands into records. It holds only its
// configuration; all state is passed in.
type Engine struct{ cfg Config }

// New returns an engine with cfg (zero fields mean defaults).
func New(cfg Config) *Engine { return &Engine{cfg: cfg} }

// Decide validates cmd against st (the flow ID's latest run, nil when there
// is none) and returns the records to log, in one batch, in order. It does
// not modify st. Errors are *Error values with a Code (E28); on an error
// nothing is to be logged. After the batch is durable the node applies each
// record with Apply and performs the effects.
//
// A command that is valid but changes nothing returns no records (an
// idempotent StartFlow retry; a PublishToChannel whose request ID the run
// already accepted; RecoverAttempts with nothing to recover).
func (e *Engine) Decide(st *FlowState, cmd Command, now time.Time) ([]Record, error) {
	d := &decider{e: e, now: now.UTC(), st: st.Clone()}
	var err error
	switch c := cmd.(type) {
	case StartFlow:
		err = d.start(c)
	case SetDefinition:
		err = d.setDefinition(c)
	case StopFlow:
		err = d.stop(c)
	case PublishToChannel:
		err = d.publish(c)
	case SetAttributes:
		err = d.setAttributes(c)
	case SkipTimer:
		err = d.skipTimer(c)
	case TimerFired:
		err = d.timerFired(c)
	case TaskStarted:
		err = d.taskStarted(c)
	case WaitForResult:
		err = d.waitForResult(c)
	case ExecuteResult:
		err = d.executeResult(c)
	case RPCResult:
		err = d.rpcResult(c)
	case TaskFailed:
		err = d.taskFailed(c)
	case RecoverAttempts:
		err = d.recoverAttempts(c)
	case SubFlowUpdate:
		err = d.subFlowUpdate(c)
	case LockRPC:
		err = d.lockRPC(c)
	case UnlockRPC:
		err = d.unlockRPC(c)
	case Heartbeat:
		err = d.heartbeat(c)
	case ResetFlow:
		err = d.reset(c)
	default:
		err = invalidArg("command", "unknown command %T", cmd)
	}
	if err != nil {
		return nil, err
	}
	if d.st != nil && d.st.Opts != nil {
		d.retryFailed() // E34
	}
	return d.recs, nil
}

// decider holds one Decide call: a private copy of the state that every
// emitted record is applied to, so later decisions see earlier ones.
type decider struct {
	e    *Engine
	now  time.Time
	st   *FlowState
	recs []Record
}

func (d *decider) emit(body RecordBody) {
	d.emitFor(d.st.FlowID, d.st.RunID, body)
}

func (d *decider) emitFor(flowID, runID string, body RecordBody) {
	rec := Record{FlowID: flowID, RunID: runID, At: d.now, Body: body}
	d.st, _ = Apply(d.st, rec)
	d.recs = append(d.recs, rec)
}

// target checks that a client command addresses the latest run of st.
func (d *decider) target(flowID, runID string) error {
	if flowID == "" {
		return invalidArg("flowId", "must not be empty")
	}
	if d.st == nil || d.st.FlowID != flowID {
		return notFound(flowID)
	}
	if runID != "" && runID != d.st.RunID {
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf("flow %q has no run %s (latest is %s)", flowID, runID, d.st.RunID)}
	}
	return nil
}

// active is target plus "the run is running".
func (d *decider) active(flowID, runID string) error {
	if err := d.target(flowID, runID); err != nil {
		return err
	}
	if !d.st.Running() {
		return closedErr(d.st)
	}
	return nil
}

func (d *decider) closeFlow(status Status, et ErrorType, msg string) {
	d.emit(FlowClosed{CloseInfo{Status: status, ErrorType: et, Message: msg}})
}

// branchEnded completes the flow when a graceful complete was requested and
// no step execution is left (E5).
func (d *decider) branchEnded() {
	if d.st.Running() && d.st.GracefulRequested && len(d.st.Steps) == 0 {
		d.closeFlow(StatusCompleted, "", "")
	}
}

// createStep creates a step execution and schedules its first attempt
// (E1, E4, E13).
func (d *decider) createStep(typ string, input Value, override *StepOptions, skipWaitFor bool, parent string) {
	d.createStepAt(typ, input, override, skipWaitFor, parent, d.now)
}

// createStepAt is createStep with the first attempt not before notBefore
// (a start delay, E34).
func (d *decider) createStepAt(typ string, input Value, override *StepOptions, skipWaitFor bool, parent string, notBefore time.Time) {
	n := d.st.StepCounters[typ] + 1
	var own *StepOptions
	hasWaitFor := true
	if def := d.st.Definition; def != nil {
		sd := def.Steps[typ]
		own, hasWaitFor = sd.Options, sd.HasWaitFor
	}
	id := stepExecID(typ, n)
	created := StepCreated{StepExecID: id, StepType: typ, N: n, Input: input, ParentID: parent,
		Options:    resolveOptions(d.e.cfg.defaults(), override, own, d.st.Config),
		HasWaitFor: hasWaitFor && !skipWaitFor}
	if d.st.Definition == nil {
		created.Override = override // for a later definition (setDefinition)
	}
	d.emit(created)
	m := MethodExecute
	if hasWaitFor && !skipWaitFor {
		m = MethodWaitFor
	}
	d.emit(AttemptScheduled{StepExecID: id, Method: m, Attempt: 1, FirstAt: notBefore, NotBefore: notBefore})
}

// stepExecID names the n-th step execution of a step type (E1).
func stepExecID(typ string, n int) string { return fmt.Sprintf("%s-%d", typ, n) }

// movementIDs returns the IDs createStep will give to ms, in order, when
// they are created next (for the completion record that precedes them).
func (d *decider) movementIDs(ms []Movement) []string {
	if len(ms) == 0 {
		return nil
	}
	last := map[string]int{}
	ids := make([]string, len(ms))
	for i, m := range ms {
		n, ok := last[m.StepType]
		if !ok {
			n = d.st.StepCounters[m.StepType]
		}
		last[m.StepType] = n + 1
		ids[i] = stepExecID(m.StepType, n+1)
	}
	return ids
}

// evaluate checks every waiting step, in creation order, against the
// queues; it consumes messages for ready channel conditions and schedules
// Execute for satisfied waits (E15-E18). AnyOf stops at its first satisfied
// condition, so the others consume nothing.
func (d *decider) evaluate() {
	for _, id := range d.stepIDs() {
		s := d.st.Step(id)
		if s == nil || s.Phase != PhaseWaiting {
			continue
		}
		if s.Wait.Mode == AnyCombination {
			if !s.Wait.Done() {
				d.evaluateCombination(s)
			}
			if s = d.st.Step(id); s != nil && s.Wait.Done() {
				d.emit(AttemptScheduled{StepExecID: s.ID, Method: MethodExecute, Attempt: 1, FirstAt: d.now, NotBefore: d.now})
			}
			continue
		}
		w := s.Wait
		for i := range w.Conditions {
			if w.Done() {
				break
			}
			c := &w.Conditions[i]
			if c.Satisfied || c.Kind != CondChannel {
				continue
			}
			if n := c.take(len(d.st.Channels[c.Channel])); n >= 0 {
				d.emit(ConditionSatisfied{StepExecID: s.ID, Index: i, Count: n})
			}
		}
		if w.Done() {
			d.emit(AttemptScheduled{StepExecID: s.ID, Method: MethodExecute, Attempt: 1, FirstAt: d.now, NotBefore: d.now})
		}
	}
}

func (d *decider) stepIDs() []string {
	ids := make([]string, len(d.st.Steps))
	for i, s := range d.st.Steps {
		ids[i] = s.ID
	}
	return ids
}

// failAttempt fails the running attempt of s and schedules its retry, or
// applies the method's exhaustion policy (E9-E12).
func (d *decider) failAttempt(s *StepExec, f Failure, retryAfter *time.Duration) {
	a := s.Attempt
	j := retryJitter(d.st.FlowID, d.st.RunID, s.ID, a.Method, a.Number)
	at, retry := s.policy(a.Method).Retry.nextAttempt(a, d.now, retryAfter, j)
	if f.NonRetryable {
		retry = false
	}
	// A WaitFor attempt of a step that has none (a worker held it when the
	// run's first definition arrived, E4) is not retried: its step goes to
	// Execute, as SetDefinition sends one no worker holds.
	noWaitFor := a.Method == MethodWaitFor && !s.HasWaitFor
	if noWaitFor {
		retry = false
	}
	failed := AttemptFailed{StepExecID: s.ID, Method: a.Method, Attempt: a.Number, Duration: d.elapsed(a), Failure: f}
	if retry {
		failed.NextAttemptAt = at
	}
	d.emit(failed)
	if retry {
		d.emit(AttemptScheduled{StepExecID: s.ID, Method: a.Method, Attempt: a.Number + 1, FirstAt: a.FirstAt, NotBefore: at})
		return
	}
	if noWaitFor {
		d.emit(AttemptScheduled{StepExecID: s.ID, Method: MethodExecute, Attempt: 1, FirstAt: d.now, NotBefore: d.now})
		return
	}
	msg := fmt.Sprintf("step %s %s failed after %d attempts: %s: %s", s.ID, a.Method, a.Number, f.Type, f.Message)
	if f.NonRetryable {
		msg = fmt.Sprintf("step %s %s failed at attempt %d with a non-retryable error: %s: %s", s.ID, a.Method, a.Number, f.Type, f.Message)
	}
	switch {
	case a.Method == MethodWaitFor && s.Options.WaitForFailure == Proceed:
		d.emit(AttemptScheduled{StepExecID: s.ID, Method: MethodExecute, Attempt: 1, FirstAt: d.now, NotBefore: d.now, WaitForFailed: &f})
	case a.Method == MethodExecute && s.Options.RecoveryStep != "":
		d.emit(StepEnded{StepExecID: s.ID, Reason: msg})
		d.createStep(s.Options.RecoveryStep, s.Input, nil, false, s.ID)
	default:
		d.closeFlow(StatusFailed, ErrWorkerAPIFail, msg)
	}
}

// elapsed is the duration of a running attempt so far.
func (d *decider) elapsed(a Attempt) time.Duration {
	if a.StartedAt.IsZero() {
		return 0
	}
	return max(d.now.Sub(a.StartedAt), 0)
}

// invalidResult fails an attempt whose result is malformed (E28).
func (d *decider) invalidResult(s *StepExec, err error) {
	d.failAttempt(s, Failure{Type: string(ErrInvalidUserFlowCode), Message: detail(err)}, nil)
}

// detail renders a validation error without its code: "field: message".
func detail(err error) string {
	var e *Error
	switch {
	case !errors.As(err, &e):
		return err.Error()
	case e.Field == "":
		return e.Message
	default:
		return e.Field + ": " + e.Message
	}
}

// checkValue enforces the payload limit (E28).
func (d *decider) checkValue(field string, v Value) error {
	if limit := d.e.cfg.maxPayload(); v.Len() > limit {
		return tooLarge(field, v.Len(), limit)
	}
	return nil
}

func (d *decider) stepDeclared(typ string) bool {
	if d.st.Definition == nil {
		return typ != ""
	}
	_, ok := d.st.Definition.Steps[typ]
	return ok
}

func (d *decider) attributeDeclared(name string) bool {
	if d.st.Definition == nil {
		return name != ""
	}
	_, ok := declaredName(d.st.Definition.Attributes, name)
	return ok
}

func (d *decider) channelDeclared(name string) bool {
	if d.st.Definition == nil {
		return name != ""
	}
	_, ok := declaredName(d.st.Definition.Channels, name)
	return ok
}

func (d *decider) checkAttributes(field string, ws []AttributeWrite) error {
	for i, w := range ws {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !d.attributeDeclared(w.Name) {
			return invalidArg(f+".name", "attribute %q is not declared", w.Name)
		}
		if err := d.checkValue(f+".value", w.Value); err != nil {
			return err
		}
		if ia, ok := d.indexed(w.Name); ok {
			if err := checkIndexedValue(ia, w.Value); err != nil {
				return invalidArg(f+".value", "attribute %q: %v", w.Name, err)
			}
		}
	}
	return nil
}

func (d *decider) checkPublishes(field string, ps []Publish) error {
	for i, p := range ps {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !d.channelDeclared(p.Channel) {
			return invalidArg(f+".channel", "channel %q is not declared", p.Channel)
		}
		if err := d.checkValue(f+".value", p.Value); err != nil {
			return err
		}
	}
	return nil
}

func (d *decider) checkStaged(field string, s Staged) error {
	if err := d.checkAttributes(field+".attributes", s.Attributes); err != nil {
		return err
	}
	if err := d.checkPublishes(field+".publishes", s.Publishes); err != nil {
		return err
	}
	if evs := s.UserEvents(); len(evs) > 0 {
		return d.checkEvents(field+".events", evs)
	}
	return nil
}

func (d *decider) checkMovements(field string, ms []Movement) error {
	for i, m := range ms {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !d.stepDeclared(m.StepType) {
			return invalidArg(f+".stepType", "step type %q is not declared by flow type %q", m.StepType, d.st.FlowType)
		}
		if err := d.checkValue(f+".input", m.Input); err != nil {
			return err
		}
		if err := validateOptions(f+".options", m.Options, d.stepDeclared); err != nil {
			return err
		}
		if err := d.checkOptionLocks(f+".options", m.Options); err != nil {
			return err
		}
	}
	return nil
}
