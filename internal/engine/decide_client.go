package engine

import (
	"fmt"
	"slices"
	"time"
)

// start decides StartFlow (E2, E3). Without a start step the flow starts
// at the one its definition declares, if any.
func (d *decider) start(c StartFlow) error {
	if c.StartStep == "" && c.Definition != nil {
		c.StartStep = c.Definition.Start
	}
	if c.StartStep == "" && (!c.Input.IsZero() || c.StartOptions != nil) {
		return invalidArg("startStep.stepType",
			"flow type %q declares no start step (or no worker has declared the type yet): name the step the input is for", c.FlowType)
	}
	if err := d.validateStart(c); err != nil {
		return err
	}
	prev := d.st
	terminated := ""
	if prev != nil {
		if prev.FlowID != c.FlowID {
			return invalidArg("flowId", "state of flow %q passed for flow %q", prev.FlowID, c.FlowID)
		}
		// A retry of the latest run's start skips the policy (E3).
		if c.RequestID != "" && c.RequestID == prev.StartRequestID {
			return nil
		}
		if c.Parent != nil && subFlowStart(prev, c) {
			return nil // attach (E31)
		}
		if c.RunID == prev.RunID {
			return invalidArg("runId", "run ID %s is already used", c.RunID)
		}
		if c.Parent == nil {
			if err := reuseAllowed(prev, c.IDReusePolicy); err != nil {
				return err
			}
		}
		if prev.Running() {
			d.closeFlow(StatusTerminated, "", fmt.Sprintf("terminated by the start of run %s", c.RunID))
			terminated = prev.RunID
		}
	}
	firstAt := d.now.Add(c.StartDelay) // E34
	var timeoutAt time.Time
	if c.Timeout > 0 {
		timeoutAt = firstAt.Add(c.Timeout)
	}
	policy := c.TimeoutPolicy
	if policy == "" && c.TimeoutHandler != nil {
		policy = TimeoutRunHandler
	}
	if policy == "" && c.Timeout > 0 {
		policy = TimeoutFail
	}
	started := FlowStarted{FlowType: c.FlowType, RequestID: c.RequestID, Definition: c.Definition,
		Config: c.Config, TimeoutAt: timeoutAt, TimeoutPolicy: policy, Attributes: c.Attributes,
		IDReusePolicy: c.IDReusePolicy, TerminatedRunID: terminated, TraceContext: c.TraceContext, Parent: c.Parent,
		StartDelay: c.StartDelay, Retry: d.flowRetryOf(c, c.RunID), TimeoutHandler: timeoutHandlerOf(c)}
	if prev != nil {
		started.PreviousRunID = prev.RunID
		// Publish request IDs are deduplicated per flow ID, not per run:
		// the client names no run, so a retry of a publish the replaced
		// run accepted may arrive after this start (E16).
		started.PublishRequestIDs = slices.Clone(d.st.PublishRequestIDs)
	}
	if c.StartStep != "" {
		started.StartStep = &Movement{StepType: c.StartStep, Input: c.Input, Options: c.StartOptions}
	}
	d.emitFor(c.FlowID, c.RunID, started)
	if c.StartStep != "" {
		d.createStepAt(c.StartStep, c.Input, c.StartOptions, false, "", firstAt)
	}
	return nil
}

// reuseAllowed applies the ID reuse policy to the latest run (E3).
func reuseAllowed(prev *FlowState, p IDReusePolicy) error {
	ok := false
	switch p {
	case ReuseDefault, ReuseAllowIfNotRunning:
		ok = !prev.Running()
	case ReuseAllowIfPreviousFailed:
		ok = prev.Status == StatusFailed || prev.Status == StatusCanceled || prev.Status == StatusTerminated
	case ReuseTerminateIfRunning:
		ok = true
	}
	if ok {
		return nil
	}
	policy := p
	if policy == ReuseDefault {
		policy = "default"
	}
	return &Error{Code: CodeAlreadyExists, Message: fmt.Sprintf(
		"flow %q already has run %s (%s); ID reuse policy %s rejects a new run", prev.FlowID, prev.RunID, prev.Status, policy)}
}

func (d *decider) validateStart(c StartFlow) error {
	switch {
	case c.FlowID == "":
		return invalidArg("flowId", "must not be empty")
	case c.FlowType == "":
		return invalidArg("flowType", "must not be empty")
	case c.RunID == "":
		return invalidArg("runId", "must not be empty")
	case c.Timeout < 0:
		return invalidArg("timeout", "must not be negative")
	}
	if err := checkSubFlowStart(c); err != nil {
		return err
	}
	switch c.TimeoutPolicy {
	case "", TimeoutFail, TimeoutCancel, TimeoutRunHandler:
	default:
		return invalidArg("timeoutPolicy", "unknown policy %q", c.TimeoutPolicy)
	}
	switch c.IDReusePolicy {
	case ReuseDefault, ReuseDisallow, ReuseAllowIfNotRunning, ReuseAllowIfPreviousFailed, ReuseTerminateIfRunning:
	default:
		return invalidArg("idReusePolicy", "unknown policy %q", c.IDReusePolicy)
	}
	if err := validateDefinition("definition", c.Definition, c.FlowType); err != nil {
		return err
	}
	// Check names against the definition the new run will have.
	v := &decider{e: d.e, st: &FlowState{FlowType: c.FlowType, Definition: c.Definition}}
	if c.StartStep != "" && !v.stepDeclared(c.StartStep) {
		return invalidArg("startStep", "step type %q is not declared by flow type %q", c.StartStep, c.FlowType)
	}
	if err := v.checkValue("input", c.Input); err != nil {
		return err
	}
	if !c.InputChecked {
		if err := CheckStartInput(c.Definition, c.StartStep, c.Input); err != nil {
			return err
		}
	}
	if err := d.validateFlowOptions(c, v.stepDeclared); err != nil {
		return err
	}
	if err := validateOptions("startOptions", c.StartOptions, v.stepDeclared); err != nil {
		return err
	}
	if err := v.checkOptionLocks("startOptions", c.StartOptions); err != nil {
		return err
	}
	if err := validateOptions("config", c.Config, v.stepDeclared); err != nil {
		return err
	}
	if err := v.checkOptionLocks("config", c.Config); err != nil {
		return err
	}
	if err := v.checkAttributes("attributes", c.Attributes); err != nil {
		return err
	}
	if err := v.checkAttributeTypes("attributes", c.Attributes); err != nil {
		return err
	}
	if err := v.checkRequest(c.Input.Len() + attributeBytes(c.Attributes)); err != nil {
		return err
	}
	return v.checkFlowAttributes("attributes", nil, c.Attributes) // a new run starts without attributes
}

// validateDefinition checks a registered definition.
func validateDefinition(field string, def *FlowDefinition, flowType string) error {
	if def == nil {
		return nil
	}
	if def.Type != flowType {
		return invalidArg(field+".type", "definition of flow type %q given for %q", def.Type, flowType)
	}
	if err := ValidateValueTypes(field+".attributeTypes", def.AttributeTypes, def.Attributes); err != nil {
		return err
	}
	if err := ValidateValueTypes(field+".channelTypes", def.ChannelTypes, def.Channels); err != nil {
		return err
	}
	if err := validateMapDecls(field+".attributes", "attribute", def.Attributes); err != nil {
		return err
	}
	if err := validateMapDecls(field+".channels", "channel", def.Channels); err != nil {
		return err
	}
	declared := func(typ string) bool { _, ok := def.Steps[typ]; return ok }
	for name, sd := range def.Steps {
		if name == "" {
			return invalidArg(field+".steps", "empty step type")
		}
		if err := validateOptions(field+".steps["+name+"].options", sd.Options, declared); err != nil {
			return err
		}
		if err := definitionLocks(field+".steps["+name+"].options", def, sd.Options); err != nil {
			return err
		}
		if err := ValidateValueType(field+".steps["+name+"].input", sd.Input); err != nil {
			return err
		}
	}
	return nil
}

func (d *decider) setDefinition(c SetDefinition) error {
	if err := d.active(c.FlowID, ""); err != nil {
		return err
	}
	if c.Definition == nil {
		return invalidArg("definition", "must be set")
	}
	if err := validateDefinition("definition", c.Definition, d.st.FlowType); err != nil {
		return err
	}
	declared := func(typ string) bool { _, ok := c.Definition.Steps[typ]; return ok }
	if err := validateOptions("defaults", c.Defaults, declared); err != nil {
		return err
	}
	set := DefinitionSet{Definition: c.Definition}
	config := d.st.Config
	if config == nil && c.Defaults != nil {
		set.Config, config = c.Defaults, c.Defaults
	}
	if d.st.Definition == nil {
		set.Steps = d.redefine(c.Definition, config)
	}
	d.emit(set)
	// A WaitFor that the step does not have and that no worker holds is
	// not handed out: the step goes to Execute (E4). One a worker holds
	// is answered "no wait" by the worker.
	for _, r := range set.Steps {
		s := d.st.Step(r.StepExecID)
		if !r.HasWaitFor && s.Phase == PhaseWaitFor && s.Attempt.Method == MethodWaitFor && s.Attempt.State == AttemptPending {
			// A start delay (E34) still holds: the first attempt is not due
			// before it.
			at := d.now
			if s.Attempt.Number == 1 && s.Attempt.NotBefore.After(at) {
				at = s.Attempt.NotBefore
			}
			d.emit(AttemptScheduled{StepExecID: s.ID, Method: MethodExecute, Attempt: 1, FirstAt: at, NotBefore: at})
		}
	}
	return nil
}

// redefine resolves the options of the run's step executions, all created
// without a definition, under def and the flow's config, as createStep
// would have (E13); a step type def does not declare keeps its options.
func (d *decider) redefine(def *FlowDefinition, config *StepOptions) []StepRedefined {
	var out []StepRedefined
	for _, s := range d.st.Steps {
		sd, ok := def.Steps[s.Type]
		if !ok {
			continue
		}
		r := StepRedefined{StepExecID: s.ID, Options: resolveOptions(d.e.cfg.defaults(), s.Override, sd.Options, config),
			HasWaitFor: s.HasWaitFor && sd.HasWaitFor}
		if !r.Options.equal(s.Options) || r.HasWaitFor != s.HasWaitFor {
			out = append(out, r)
		}
	}
	return out
}

// stop decides StopFlow (E23).
func (d *decider) stop(c StopFlow) error {
	if err := d.active(c.FlowID, c.RunID); err != nil {
		return err
	}
	reason := validText(c.Reason)
	switch c.Kind {
	case "", StopCancel:
		d.closeFlow(StatusCanceled, "", reason)
	case StopTerminate:
		d.closeFlow(StatusTerminated, "", reason)
	case StopFail:
		d.closeFlow(StatusFailed, ErrClientAPIFailingFlow, reason)
	default:
		return invalidArg("kind", "unknown stop kind %q", c.Kind)
	}
	return nil
}

// publish decides PublishToChannel (E16). A retry of an accepted publish
// (same request ID) changes nothing, even once the run has closed, and
// also once a new run replaced the one that accepted it (a new run starts
// with the IDs of the run it replaces), whichever run the retry names: the
// publish it repeats was accepted.
func (d *decider) publish(c PublishToChannel) error {
	if err := d.target(c.FlowID, ""); err != nil {
		return err
	}
	if len(c.RequestID) > MaxRequestIDBytes {
		return invalidArg("requestId", "is %d bytes, at most %d are allowed", len(c.RequestID), MaxRequestIDBytes)
	}
	if d.st.publishAccepted(c.RequestID) {
		return nil
	}
	if err := d.target(c.FlowID, c.RunID); err != nil {
		return err
	}
	if !d.st.Running() {
		return closedErr(d.st)
	}
	if len(c.Messages) == 0 {
		return invalidArg("messages", "must not be empty")
	}
	if err := d.checkPublishes("messages", c.Messages); err != nil {
		return err
	}
	if err := d.checkPublishTypes("messages", c.Messages); err != nil {
		return err
	}
	if err := d.checkRequest(publishBytes(c.Messages)); err != nil {
		return err
	}
	d.emit(ChannelPublished{Messages: c.Messages, RequestID: c.RequestID})
	d.evaluate()
	return nil
}

// setAttributes decides SetAttributes (E21).
func (d *decider) setAttributes(c SetAttributes) error {
	if err := d.active(c.FlowID, c.RunID); err != nil {
		return err
	}
	if len(c.Attributes) == 0 {
		return invalidArg("attributes", "must not be empty")
	}
	if err := d.checkAttributes("attributes", c.Attributes); err != nil {
		return err
	}
	if err := d.checkAttributeTypes("attributes", c.Attributes); err != nil {
		return err
	}
	if err := d.checkRequest(attributeBytes(c.Attributes)); err != nil {
		return err
	}
	if err := d.checkFlowAttributes("attributes", d.st.Attributes, c.Attributes); err != nil {
		return err
	}
	d.emit(AttributesSet{Attributes: c.Attributes})
	return nil
}

func timerNotPending(format string, args ...any) error {
	return &Error{Code: CodeFailedPrecondition, Message: fmt.Sprintf(format, args...), Reason: ErrTimerNotPending}
}

// skipTimer decides SkipTimer (E19).
func (d *decider) skipTimer(c SkipTimer) error {
	if err := d.active(c.FlowID, c.RunID); err != nil {
		return err
	}
	if c.StepExecID == "" {
		return invalidArg("stepExecId", "must not be empty")
	}
	s := d.st.Step(c.StepExecID)
	if s == nil || s.Phase != PhaseWaiting {
		return timerNotPending("step execution %s is not waiting", c.StepExecID)
	}
	idx := -1
	for i, cond := range s.Wait.Conditions {
		if cond.Kind == CondTimer && ((c.TimerID != "" && cond.ID == c.TimerID) || (c.TimerID == "" && cond.TimerIndex == c.TimerIndex)) {
			idx = i
		}
	}
	if !s.Wait.pendingTimer(idx) {
		if c.TimerID != "" {
			return timerNotPending("step execution %s has no pending timer %q", s.ID, c.TimerID)
		}
		return timerNotPending("step execution %s has no pending timer with index %d", s.ID, c.TimerIndex)
	}
	d.emit(WaitTimerFired{StepExecID: s.ID, Index: idx, Skipped: true})
	d.evaluate()
	return nil
}

// timerFired decides TimerFired (E9, E15, E20, E24).
func (d *decider) timerFired(c TimerFired) error {
	if err := d.target(c.FlowID, c.RunID); err != nil {
		return err
	}
	if c.RunID == "" {
		return invalidArg("runId", "must not be empty")
	}
	if !d.st.Running() {
		return timerNotPending("%s: run is %s", c.Timer, d.st.Status)
	}
	due := func(at time.Time) error {
		if d.now.Before(at) {
			return &Error{Code: CodeFailedPrecondition, Reason: ErrTimerNotDue,
				Message: fmt.Sprintf("%s is due at %s", c.Timer, at.Format(time.RFC3339Nano))}
		}
		return nil
	}
	t := c.Timer
	switch t.Kind {
	case TimerFlowTimeout:
		if d.st.TimeoutAt.IsZero() {
			return timerNotPending("the flow has no timeout")
		}
		if err := due(d.st.TimeoutAt); err != nil {
			return err
		}
		msg := fmt.Sprintf("flow timed out at %s", d.st.TimeoutAt.Format(time.RFC3339Nano))
		switch {
		case d.st.TimeoutPolicy == TimeoutRunHandler && d.st.timeoutHandler() != nil:
			d.runTimeoutHandler() // E34
		case d.st.TimeoutPolicy == TimeoutCancel:
			d.closeFlow(StatusCanceled, ErrFlowTimeout, msg)
		default:
			d.closeFlow(StatusFailed, ErrFlowTimeout, msg)
		}
	case TimerTimeoutHandler:
		return d.handlerDeadline(due)
	case TimerWait:
		s := d.st.Step(t.StepExecID)
		if s == nil || s.Phase != PhaseWaiting {
			return timerNotPending("%s: step is not waiting", t)
		}
		idx := -1
		for i, cond := range s.Wait.Conditions {
			if cond.Kind == CondTimer && cond.TimerIndex == t.Index {
				idx = i
			}
		}
		if !s.Wait.pendingTimer(idx) {
			return timerNotPending("%s is not pending", t)
		}
		if err := due(s.Wait.Conditions[idx].FireAt); err != nil {
			return err
		}
		d.emit(WaitTimerFired{StepExecID: s.ID, Index: idx})
		d.evaluate()
	case TimerHeartbeat:
		return d.heartbeatTimedOut(t)
	case TimerAttemptTimeout:
		s := d.st.Step(t.StepExecID)
		if s == nil || s.Phase == PhaseWaiting || s.Attempt.State != AttemptRunning ||
			s.Attempt.Method != t.Method || s.Attempt.Number != t.Attempt {
			return timerNotPending("%s: attempt is not running", t)
		}
		if err := due(s.Attempt.TimeoutAt); err != nil {
			return err
		}
		d.failAttempt(s, Failure{Type: FailureTimeout,
			Message: fmt.Sprintf("attempt %d of %s timed out after %v", t.Attempt, t.Method, s.policy(t.Method).Timeout)}, nil)
	default:
		return invalidArg("timer.kind", "unknown timer kind %q", t.Kind)
	}
	return nil
}

// checkPublishTypes refuses a client's message that does not match its
// channel's declared type (valueshape.go), naming the channel.
func (d *decider) checkPublishTypes(field string, ps []Publish) error {
	if d.st.Definition == nil {
		return nil
	}
	for i, p := range ps {
		if err := d.st.Definition.channelType(p.Channel).Check(p.Value); err != nil {
			return invalidArg(fmt.Sprintf("%s[%d].value", field, i), "channel %q: %v", p.Channel, err)
		}
	}
	return nil
}

// checkAttributeTypes refuses a client's attribute value that does not
// match the attribute's declared type, naming the attribute.
func (d *decider) checkAttributeTypes(field string, ws []AttributeWrite) error {
	if d.st.Definition == nil {
		return nil
	}
	for i, w := range ws {
		if err := d.st.Definition.attributeType(w.Name).Check(w.Value); err != nil {
			return invalidArg(fmt.Sprintf("%s[%d].value", field, i), "attribute %q: %v", w.Name, err)
		}
	}
	return nil
}

// CheckStartInput checks a start's input against the type that def
// declares for its start step (nil def, or a step def does not declare:
// nothing to check; Decide reports an undeclared step itself). It is
// Decide's own check, for a caller that runs it before Decide and sets
// StartFlow.InputChecked.
func CheckStartInput(def *FlowDefinition, startStep string, input Value) error {
	if def == nil {
		return nil
	}
	if startStep == "" {
		startStep = def.Start // as Decide resolves it
	}
	if err := def.Steps[startStep].Input.Check(input); err != nil {
		return invalidArg("input", "start step %q: %v", startStep, err)
	}
	return nil
}
