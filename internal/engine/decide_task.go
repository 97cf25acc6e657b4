package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// checkMethod checks that a result command carries a token of its method.
func checkMethod(tok Token, m Method) error {
	if tok.Method != m {
		return invalidArg("token.method", "a %s result carries a %q token", m, tok.Method)
	}
	return nil
}

// stepToken checks that tok names a step method of this flow.
func (d *decider) stepToken(tok Token) error {
	if tok.Method != MethodWaitFor && tok.Method != MethodExecute {
		return invalidArg("token.method", "unknown step method %q", tok.Method)
	}
	if d.st == nil || d.st.FlowID != tok.FlowID {
		return notFound(tok.FlowID)
	}
	return nil
}

// worker looks up the step whose running attempt tok names (W2); m is the
// method the result is for.
func (d *decider) worker(tok Token, m Method) (*StepExec, error) {
	if err := checkMethod(tok, m); err != nil {
		return nil, err
	}
	if err := d.stepToken(tok); err != nil {
		return nil, err
	}
	return d.st.running(tok)
}

// taskStarted decides TaskStarted (W4): the attempt must be scheduled and
// due; an attempt is handed out once (W3).
func (d *decider) taskStarted(c TaskStarted) error {
	tok := c.Token
	if err := d.stepToken(tok); err != nil {
		return err
	}
	s, err := d.st.startable(tok)
	if err != nil {
		return err
	}
	if s.Attempt.State != AttemptPending {
		return staleErr("attempt %d of %s %s is already handed out", tok.Attempt, s.ID, tok.Method)
	}
	if d.now.Before(s.Attempt.NotBefore) {
		return &Error{Code: CodeFailedPrecondition, Message: fmt.Sprintf("attempt %d of %s %s is not due before %s",
			tok.Attempt, s.ID, tok.Method, s.Attempt.NotBefore.Format(time.RFC3339Nano))}
	}
	if locks := s.Options.MethodLocks(tok.Method); len(locks) > 0 {
		// E30: the attempt waits, consuming nothing, until it can take
		// its whole lock set; a release dispatches it again.
		if err := d.st.lockConflict(locks, d.now, s); err != nil {
			return err
		}
	}
	d.emit(AttemptStarted{StepExecID: s.ID, Method: tok.Method, Attempt: tok.Attempt, Epoch: tok.Epoch,
		Async: c.Async, TimeoutAt: d.now.Add(s.policy(tok.Method).Timeout)})
	return nil
}

// waitForResult decides a WaitFor result (E4, E6, E15).
func (d *decider) waitForResult(c WaitForResult) error {
	s, err := d.worker(c.Token, MethodWaitFor)
	if err != nil {
		return err
	}
	if err := validateWait("wait", c.Wait, d.channelDeclared); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	if err := d.checkStaged("staged", c.Staged); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	if err := d.checkSubFlows("wait", c.Wait); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	if err := checkLocals(c.Locals); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	if err := d.checkStagedLimits(subFlowBytes(c.Wait)+localBytes(c.Locals), c.Staged); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	var w *StoredWait
	if !c.Wait.isEmpty() {
		w = storeWait(c.Wait, d.now)
		d.deriveSubFlows(w, s)
	}
	d.emit(WaitForCompleted{StepExecID: s.ID, Attempt: s.Attempt.Number, Duration: d.elapsed(s.Attempt), Wait: w, Staged: c.Staged, Locals: c.Locals})
	if w == nil {
		d.emit(AttemptScheduled{StepExecID: s.ID, Method: MethodExecute, Attempt: 1, FirstAt: d.now, NotBefore: d.now})
	}
	d.evaluate()
	return nil
}

// validateDecision checks an Execute decision (E5, E28, E29).
func (d *decider) validateDecision(dec Decision) error {
	if err := d.checkCancel("decision.cancel", dec.Cancel); err != nil {
		return err
	}
	switch dec.Kind {
	case DecideMovements:
		if len(dec.Movements) == 0 {
			return invalidArg("decision.movements", "a MOVEMENTS decision needs at least one movement")
		}
		return d.checkMovements("decision.movements", dec.Movements)
	case DecideForceCompleteIfChannelsEmpty:
		return d.checkCloseIfEmpty(dec)
	case DecideGracefulComplete, DecideForceComplete, DecideForceFail, DecideDeadEnd:
		if len(dec.Movements) > 0 {
			return invalidArg("decision.movements", "a %s decision takes no movements", dec.Kind)
		}
		return d.checkValue("decision.output", dec.Output)
	default:
		return invalidArg("decision.kind", "unknown decision kind %q", dec.Kind)
	}
}

// checkContinue checks a decision's continue-as-new request (E37): it
// goes with movements or a dead end, which leave the flow running.
func checkContinue(dec Decision) error {
	if dec.ContinueAsNew && dec.Kind != DecideMovements && dec.Kind != DecideDeadEnd {
		return invalidArg("decision.continueAsNew", "continue-as-new goes with MOVEMENTS or DEAD_END, not %s", dec.Kind)
	}
	return nil
}

// executeResult decides an Execute result (E5, E6, E7).
func (d *decider) executeResult(c ExecuteResult) error {
	s, err := d.worker(c.Token, MethodExecute)
	if err != nil {
		return err
	}
	if err := d.validateDecision(c.Decision); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	if err := checkContinue(c.Decision); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	if err := d.checkStaged("staged", c.Staged); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	dec := c.Decision
	if err := d.checkStagedLimits(dec.Output.Len()+movementBytes(dec.Movements), c.Staged); err != nil {
		d.invalidResult(s, err)
		return nil
	}
	done := ExecuteCompleted{StepExecID: s.ID, Attempt: s.Attempt.Number, Duration: d.elapsed(s.Attempt),
		Kind: dec.Kind, Reason: validText(dec.Reason), Staged: c.Staged}
	if !dec.Cancel.IsZero() {
		done.Cancel = dec.Cancel
	}
	switch dec.Kind {
	case DecideGracefulComplete, DecideForceComplete:
		done.Output = dec.Output
	case DecideMovements:
		done.Movements, done.Scheduled = dec.Movements, d.movementIDs(dec.Movements)
	case DecideForceCompleteIfChannelsEmpty:
		// Decided here, against the queues this decision commits on
		// (E32, locals.go): nothing can be published in between.
		chans := dec.CloseIfEmpty().Channels
		done.Output, done.Movements = dec.Output, dec.Movements
		done.IfChannelsEmpty = &IfChannelsEmpty{Channels: chans, ChannelsEmpty: d.st.channelsEmpty(chans)}
		if !done.ChannelsEmpty {
			done.Scheduled = d.movementIDs(dec.Movements)
		}
	}
	d.emit(done)
	d.cancelSteps(done.Cancel, s.ID, "", s.ParentID) // before the movements: they are never selected (E29)
	switch done.effectiveKind() {
	case DecideMovements:
		for _, m := range dec.Movements {
			d.createStep(m.StepType, m.Input, m.Options, m.SkipWaitFor, s.ID)
		}
	case DecideForceComplete:
		d.closeFlow(StatusCompleted, "", "")
	case DecideForceFail:
		d.closeFlow(StatusFailed, ErrStepDecisionFailingFlow, validText(dec.Reason))
	}
	if d.st.Running() {
		d.evaluate()
		d.branchEnded()
	}
	if dec.ContinueAsNew {
		d.continueReq = &continueRequest{reason: validText(dec.Reason), stepExecID: s.ID}
	}
	return nil
}

// taskFailed decides a failed attempt (E9, E10, E14).
func (d *decider) taskFailed(c TaskFailed) error {
	s, err := d.worker(c.Token, c.Token.Method)
	if err != nil {
		return err
	}
	f := c.Failure
	if f.Type == "" {
		f.Type = "ERROR"
	}
	limit := d.e.cfg.maxPayload()
	f.Type, f.Message, f.Stack = cutText(f.Type, limit), cutText(f.Message, limit), cutText(f.Stack, limit)
	d.failAttempt(s, f, c.RetryAfter)
	return nil
}

// recoverAttempts decides RecoverAttempts (T2-T4).
func (d *decider) recoverAttempts(c RecoverAttempts) error {
	if err := d.target(c.FlowID, ""); err != nil {
		return err
	}
	for _, id := range d.stepIDs() {
		if !d.st.Running() {
			break
		}
		s := d.st.Step(id)
		if s == nil || s.Phase == PhaseWaiting || s.Attempt.State != AttemptRunning || s.Attempt.Epoch >= c.Epoch {
			continue
		}
		// The takeover, not the step, ended the attempt: the retry counts
		// against the policy (T2) but waits no backoff, so a flow whose
		// worker is alive goes on as soon as the new process serves.
		var now time.Duration
		d.failAttempt(s, Failure{Type: FailureNotCompleted,
			Message: fmt.Sprintf("attempt %d of %s was handed out in epoch %d before a takeover", s.Attempt.Number, s.Attempt.Method, s.Attempt.Epoch)}, &now)
	}
	d.recoverRPCLocks(c.Epoch)
	return nil
}

// RPCTask checks an RPC call against the run and builds its task (E22).
// RPC calls are not logged until their result commits: the node keeps the
// caller waiting, sends the task, and submits RPCResult; a worker error goes
// back to the caller and commits nothing.
func (e *Engine) RPCTask(st *FlowState, call InvokeRPC, epoch uint64) (Task, error) {
	d := &decider{e: e, st: st}
	if err := d.checkRPC(call); err != nil {
		return Task{}, err
	}
	if len(call.Locks) > 0 && st.rpcLock(call.CallID) < 0 {
		return Task{}, &Error{Code: CodeFailedPrecondition, Reason: ErrLockHeld,
			Message: fmt.Sprintf("RPC call %q does not hold its locks (LockRPC first)", call.CallID)}
	}
	return Task{
		Token:    Token{Epoch: epoch, FlowID: st.FlowID, RunID: st.RunID, Method: MethodRPC, CallID: call.CallID},
		FlowType: st.FlowType, FlowID: st.FlowID, RunID: st.RunID, Method: MethodRPC,
		Input: call.Input, Attributes: maps.Clone(st.Attributes), RPC: call.Name, QueueSizes: st.QueueSizes(),
		TraceContext: st.TraceContext,
	}, nil
}

// checkRPC checks an RPC call against the run (E22).
func (d *decider) checkRPC(call InvokeRPC) error {
	if err := d.active(call.FlowID, call.RunID); err != nil {
		return err
	}
	st := d.st
	switch {
	case call.CallID == "":
		return invalidArg("callId", "must not be empty")
	case len(call.CallID) > MaxRequestIDBytes:
		return invalidArg("callId", "is %d bytes, at most %d are allowed", len(call.CallID), MaxRequestIDBytes)
	case st.rpcCommitted(call.CallID):
		return invalidArg("callId", "call %q already committed in run %s", call.CallID, st.RunID)
	case call.Name == "":
		return invalidArg("name", "must not be empty")
	case st.Definition != nil && !slices.Contains(st.Definition.RPCs, call.Name):
		return invalidArg("name", "RPC %q is not declared by flow type %q", call.Name, st.FlowType)
	}
	if err := d.checkValue("input", call.Input); err != nil {
		return err
	}
	return d.checkRequest(call.Input.Len())
}

// rpcResult decides an RPC's result (E22). An invalid result is the
// caller's error (FAILED_PRECONDITION, INVALID_USER_FLOW_CODE) and commits
// nothing; it never fails the flow. A result for a call that already
// committed in this run (a worker sends an unacknowledged result again
// after its stream broke) decides nothing, also once the run has closed:
// each call commits at most once.
func (d *decider) rpcResult(c RPCResult) error {
	tok := c.Token
	if err := checkMethod(tok, MethodRPC); err != nil {
		return err
	}
	if err := d.target(tok.FlowID, ""); err != nil {
		return err
	}
	if (tok.RunID == d.st.RunID || d.st.continues(tok.RunID)) && d.st.rpcCommitted(tok.CallID) {
		// A resend: this run, or an earlier run of its continue-as-new
		// chain whose call IDs it carries (E37), committed the call.
		return nil
	}
	if !d.st.Running() {
		return closedErr(d.st)
	}
	if tok.RunID != d.st.RunID || tok.CallID == "" {
		return staleErr("RPC call %q of run %s is not current", tok.CallID, tok.RunID)
	}
	if c.Locked && d.st.rpcLock(tok.CallID) < 0 {
		// E30: its locks were released (its caller gave up, a takeover):
		// another holder may have written since it read.
		return staleErr("RPC call %q no longer holds its locks", tok.CallID)
	}
	invalid := func(err error) error {
		return &Error{Code: CodeFailedPrecondition, Reason: ErrInvalidUserCode,
			Message: fmt.Sprintf("RPC %q returned an invalid result: %s: %s", c.Name, ErrInvalidUserFlowCode, detail(err))}
	}
	if err := d.checkValue("input", c.Input); err != nil {
		return err
	}
	if err := d.checkValue("output", c.Output); err != nil {
		return invalid(err)
	}
	if err := d.checkStaged("staged", c.Staged); err != nil {
		return invalid(err)
	}
	if err := d.checkMovements("movements", c.Movements); err != nil {
		return invalid(err)
	}
	if err := d.checkCancel("cancel", &CancelSelector{Steps: c.CancelSteps}); err != nil {
		return invalid(err)
	}
	if err := d.checkStagedLimits(c.Output.Len()+movementBytes(c.Movements), c.Staged); err != nil {
		return invalid(err)
	}
	var dur = d.now.Sub(c.StartedAt)
	if c.StartedAt.IsZero() || dur < 0 {
		dur = 0
	}
	d.emit(RPCCompleted{CallID: tok.CallID, Name: c.Name, Duration: dur, Input: c.Input, Output: c.Output,
		Movements: c.Movements, Scheduled: d.movementIDs(c.Movements), Staged: c.Staged, CancelSteps: c.CancelSteps})
	if len(c.CancelSteps) > 0 {
		// Flow-wide only, before the movements (E29).
		d.cancelSteps(&CancelSelector{Steps: c.CancelSteps}, "rpc:"+c.Name, tok.CallID, "")
	}
	for _, m := range c.Movements {
		d.createStep(m.StepType, m.Input, m.Options, m.SkipWaitFor, "rpc:"+c.Name)
	}
	d.evaluate()
	d.branchEnded()
	return nil
}
