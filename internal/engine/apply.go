package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Apply applies one record to st and returns the resulting state and the
// effects the node performs once the record's batch is durable.
//
// Apply changes st in place. A FlowStarted record starts a new run: Apply
// then returns a fresh state and leaves st as it was, except that a
// continuation's start takes the live state st's flow_continued_as_new
// set aside (RunOptions.carry, in memory only) and clears it. Apply is deterministic
// and total: it never fails, and a record that does not fit the state (a
// different run, an unknown step) changes nothing. Replaying a run's records
// from nil rebuilds its state exactly.
func Apply(st *FlowState, rec Record) (*FlowState, []Effect) {
	if b, ok := rec.Body.(FlowStarted); ok {
		return applyStarted(st, rec, b)
	}
	if st == nil || st.RunID != rec.RunID || st.FlowID != rec.FlowID {
		return st, nil
	}
	var eff []Effect
	switch b := rec.Body.(type) {
	case DefinitionSet:
		st.Definition = b.Definition
		if b.Config != nil {
			st.Config = b.Config
		}
		for _, r := range b.Steps {
			if s := st.Step(r.StepExecID); s != nil {
				s.Options, s.HasWaitFor = r.Options, r.HasWaitFor
			}
		}
	case StepCreated:
		if st.StepCounters == nil {
			st.StepCounters = map[string]int{}
		}
		// A reset run creates the executions active at its point again
		// with their own numbers, below the counters its start set (E37);
		// every other creation is the counter's next.
		st.StepCounters[b.StepType] = max(st.StepCounters[b.StepType], b.N)
		phase := PhaseExecute
		if b.HasWaitFor {
			phase = PhaseWaitFor
		}
		st.Steps = append(st.Steps, &StepExec{ID: b.StepExecID, Type: b.StepType, Input: b.Input,
			ParentID: b.ParentID, CreatedAt: rec.At, Options: b.Options, HasWaitFor: b.HasWaitFor, Override: b.Override,
			Phase: phase})
	case AttemptScheduled:
		s := st.Step(b.StepExecID)
		if s == nil {
			break
		}
		s.Phase = PhaseWaitFor
		if b.Method == MethodExecute {
			s.Phase = PhaseExecute
		}
		if b.WaitForFailed != nil {
			// The same Decide logged the WaitFor's last AttemptFailed just
			// before (failAttempt), which set LastFailure: its attempt and
			// time go with the error to Execute (E11).
			wf := &LastFailure{Method: MethodWaitFor, Failure: *b.WaitForFailed}
			if lf := s.LastFailure; lf != nil && lf.Method == MethodWaitFor {
				wf.Attempt, wf.At = lf.Attempt, lf.At
			}
			s.WaitForFailed = wf
		}
		if b.Attempt == 1 {
			s.LastFailure = nil
		}
		released := s.heldLocks()
		s.Attempt = Attempt{Method: b.Method, Number: b.Attempt, FirstAt: b.FirstAt,
			State: AttemptPending, NotBefore: b.NotBefore}
		eff = append(eff, DispatchTask{st.taskRef(s)})
		eff = append(eff, st.lockWaitersBut(released, s)...)
	case AttemptStarted:
		s := st.Step(b.StepExecID)
		if s == nil || s.Attempt.Method != b.Method || s.Attempt.Number != b.Attempt {
			break
		}
		s.Attempt.State = AttemptRunning
		s.Attempt.Epoch, s.Attempt.Async = b.Epoch, b.Async
		s.Attempt.StartedAt, s.Attempt.TimeoutAt = rec.At, b.TimeoutAt
		if !b.Async {
			eff = append(eff, SendTask{Token{Epoch: b.Epoch, FlowID: st.FlowID, RunID: st.RunID,
				StepExecID: s.ID, Method: b.Method, Attempt: b.Attempt}})
		}
		eff = append(eff, ArmTimer{FlowID: st.FlowID, RunID: st.RunID, Timer: attemptTimer(s), At: b.TimeoutAt})
		if s.heartbeatTimeout(b.Method) > 0 {
			eff = append(eff, ArmTimer{FlowID: st.FlowID, RunID: st.RunID, Timer: heartbeatTimer(s), At: st.heartbeatDue(s)})
		}
	case AttemptFailed:
		s := st.Step(b.StepExecID)
		if s == nil {
			break
		}
		s.LastFailure = &LastFailure{Method: b.Method, Attempt: b.Attempt, At: rec.At, Failure: b.Failure}
		typ := EventExecuteFailed
		if b.Method == MethodWaitFor {
			typ = EventWaitForFailed
		}
		f := b.Failure
		st.event(rec, HistoryEvent{Type: typ, StepExecID: s.ID, StepType: s.Type,
			Attempt: b.Attempt, Duration: b.Duration, Failure: &f, NextAttemptAt: b.NextAttemptAt})
	case WaitForCompleted:
		s := st.Step(b.StepExecID)
		if s == nil {
			break
		}
		st.event(rec, HistoryEvent{Type: EventWaitForCompleted, StepExecID: s.ID, StepType: s.Type,
			Attempt: b.Attempt, Duration: b.Duration, Wait: b.Wait.clone(), Staged: b.Staged})
		st.commit(b.Staged)
		st.userEvents(rec, b.Staged.UserEvents(), s.ID, s.Type, "")
		s.LastFailure = nil
		if b.Wait != nil {
			released := s.heldLocks()
			s.Phase, s.Wait, s.Attempt = PhaseWaiting, b.Wait.clone(), Attempt{}
			s.Wait.Locals = b.Locals
			for i, c := range s.Wait.Conditions {
				if s.Wait.pendingTimer(i) {
					eff = append(eff, ArmTimer{FlowID: st.FlowID, RunID: st.RunID,
						Timer: Timer{Kind: TimerWait, StepExecID: s.ID, Index: c.TimerIndex}, At: c.FireAt})
				}
			}
			// Without a Wait, the AttemptScheduled of Execute that
			// follows releases the WaitFor's locks.
			eff = append(eff, st.lockWaiters(released)...)
		}
		if b.Wait == nil && len(b.Locals) > 0 {
			s.Wait = &StoredWait{Locals: b.Locals} // no conditions: see StoredWait.Locals
		}
	case ConditionSatisfied:
		s := st.Step(b.StepExecID)
		if s == nil || s.Wait == nil || b.Index < 0 || b.Index >= len(s.Wait.Conditions) {
			break
		}
		c := &s.Wait.Conditions[b.Index]
		q := st.Channels[c.Channel]
		n := min(max(b.Count, 0), len(q))
		c.Messages = slices.Clone(q[:n])
		c.Satisfied = true
		if n == len(q) {
			delete(st.Channels, c.Channel)
		} else {
			st.Channels[c.Channel] = q[n:]
		}
	case WaitTimerFired:
		s := st.Step(b.StepExecID)
		if s == nil || s.Wait == nil || b.Index < 0 || b.Index >= len(s.Wait.Conditions) {
			break
		}
		c := &s.Wait.Conditions[b.Index]
		c.Satisfied, c.Skipped = true, b.Skipped
		if b.Skipped && c.Kind == CondTimer {
			st.event(rec, HistoryEvent{Type: EventTimerSkipped, StepExecID: s.ID, StepType: s.Type,
				Timer: &SkippedTimer{Index: c.TimerIndex, ID: c.ID}})
		}
	case ExecuteCompleted:
		s := st.Step(b.StepExecID)
		if s == nil {
			break
		}
		st.event(rec, HistoryEvent{Type: EventExecuteCompleted, StepExecID: s.ID, StepType: s.Type,
			Attempt: b.Attempt, Duration: b.Duration, Scheduled: b.Scheduled, Staged: b.Staged,
			Decision: &Decision{Kind: b.Kind, Movements: b.Movements, Output: b.Output, Reason: b.Reason, Cancel: b.Cancel,
				IfChannelsEmpty: b.IfChannelsEmpty}})
		st.commit(b.Staged)
		st.userEvents(rec, b.Staged.UserEvents(), s.ID, s.Type, "")
		switch b.effectiveKind() {
		case DecideGracefulComplete:
			st.GracefulRequested = true
			st.Outputs = append(st.Outputs, Output{StepType: s.Type, StepExecID: s.ID, Value: b.Output})
		case DecideForceComplete:
			st.Outputs = append(st.Outputs, Output{StepType: s.Type, StepExecID: s.ID, Value: b.Output})
		}
		released := s.heldLocks()
		st.removeStep(s.ID)
		eff = append(eff, st.lockWaiters(released)...)
	case ChannelPublished:
		st.publish(b.Messages)
		st.event(rec, HistoryEvent{Type: EventChannelPublished, Publishes: b.Messages, RequestID: b.RequestID})
		if b.RequestID != "" {
			st.rememberPublish(b.RequestID)
		}
	case AttributesSet:
		st.setAttributes(b.Attributes)
		st.event(rec, HistoryEvent{Type: EventAttributesSet, Attributes: b.Attributes})
	case RPCCompleted:
		st.event(rec, HistoryEvent{Type: EventRPCCompleted, RPC: b.Name, Duration: b.Duration, Input: b.Input,
			Output: b.Output, Movements: b.Movements, Scheduled: b.Scheduled, Staged: b.Staged, Canceled: rpcCanceled(b.CancelSteps)})
		st.commit(b.Staged)
		st.userEvents(rec, b.Staged.UserEvents(), "", "", b.Name)
		if b.CallID != "" {
			st.rememberRPC(b.CallID)
		}
		eff = append(eff, ReplyRPC{CallID: b.CallID, Output: b.Output})
		eff = append(eff, st.lockWaiters(st.unlockRPC(b.CallID))...)
	case RPCLocked:
		st.RPCLocks = append(st.RPCLocks, RPCLock(b))
	case RPCUnlocked:
		eff = append(eff, st.lockWaiters(st.unlockRPC(b.CallID))...)
	case StepEnded:
		released := st.Step(b.StepExecID).heldLocks()
		st.removeStep(b.StepExecID)
		eff = append(eff, st.lockWaiters(released)...)
	case FlowRetried:
		applyFlowRetried(st, b)
	case FlowReset:
		applyFlowReset(st, b)
	case FlowContinuedAsNew:
		eff = applyContinuedAsNew(st, rec, b)
	case TimeoutHandlerStarted:
		eff = applyTimeoutHandler(st, b)
	case SubFlowUpdated:
		st.applySubFlowUpdated(rec, b)
	case StepsCanceled:
		eff = st.applyCanceled(rec, b)
	case AttemptHeartbeat:
		eff = st.applyHeartbeat(rec, b)
	case FlowClosed:
		if !st.Running() {
			break
		}
		ci := b.CloseInfo
		eff = st.closedTasks(b.Status)
		st.Status, st.Close, st.ClosedAt = b.Status, &ci, rec.At
		st.Steps, st.TimeoutAt, st.RPCLocks = nil, time.Time{}, nil
		st.HeartbeatDetails = nil
		if st.Opts != nil {
			st.Opts.HandlerDeadlineAt = time.Time{}
		}
		st.event(rec, HistoryEvent{Type: EventFlowClosed, Close: &ci})
		eff = append(eff, NotifyClosed{FlowID: st.FlowID, RunID: st.RunID, Status: b.Status})
	}
	return st, eff
}

func applyStarted(prev *FlowState, rec Record, b FlowStarted) (*FlowState, []Effect) {
	st := &FlowState{
		FlowID: rec.FlowID, RunID: rec.RunID, FlowType: b.FlowType, Status: StatusRunning,
		StartedAt: rec.At, StartRequestID: b.RequestID, PreviousRunID: b.PreviousRunID,
		Definition: b.Definition, Config: b.Config, TimeoutAt: b.TimeoutAt, TimeoutPolicy: b.TimeoutPolicy,
		PublishRequestIDs: slices.Clone(b.PublishRequestIDs), TraceContext: b.TraceContext,
		Parent: b.Parent,
	}
	if b.Retry != nil || b.TimeoutHandler != nil {
		st.Opts = &RunOptions{TimeoutHandler: b.TimeoutHandler}
		if b.Retry != nil {
			st.Opts.Retry = &RunRetry{FlowRetry: *b.Retry, StartStep: b.StartStep, Attributes: b.Attributes}
		}
	}
	st.setAttributes(b.Attributes)
	start := &StartInfo{StartStep: b.StartStep, Attributes: b.Attributes, IDReusePolicy: b.IDReusePolicy,
		TerminatedRunID: b.TerminatedRunID, StartDelay: b.StartDelay}
	if b.Retry != nil {
		start.RetryAttempt, start.RetriedRunID = b.Retry.Attempt, b.Retry.RetriedRunID
	}
	if r := b.Reset; r != nil {
		applyResetStart(st, r)
		start.Reset = r
	}
	if b.StartStep != nil {
		start.StartStepExecID = stepExecID(b.StartStep.StepType, 1) // a new run's first step
	}
	if !b.TimeoutAt.IsZero() {
		start.Timeout = b.TimeoutAt.Sub(rec.At) - b.StartDelay // Decide sets TimeoutAt to now + delay + timeout
	}
	st.event(rec, HistoryEvent{Type: EventFlowStarted, Start: start})
	var eff []Effect
	if prev != nil {
		eff = append(eff, NotifySuperseded{Previous: prev})
	}
	if !b.TimeoutAt.IsZero() {
		eff = append(eff, ArmTimer{FlowID: st.FlowID, RunID: st.RunID, Timer: Timer{Kind: TimerFlowTimeout}, At: b.TimeoutAt})
	}
	if b.ContinuedFrom != "" {
		start.ContinuedFrom = b.ContinuedFrom
		if prev != nil && prev.RunID == b.ContinuedFrom && prev.Opts != nil {
			eff = append(eff, applyContinued(st, prev.Opts.carry)...)
			prev.Opts.carry = nil
		}
	}
	return st, eff
}

// ErrNoCarry matches the error CheckApply returns for a continuation's
// flow_started that meets no carried state (E37).
var ErrNoCarry = errors.New("a continuation's flow_started without the state of the run it continues")

// CheckApply reports a record that Apply, which is total, would apply to
// st wrongly: a continuation's flow_started (ContinuedFrom set) whose st
// is not the run it continues holding the live state that run's
// flow_continued_as_new moved aside (RunOptions.carry, in memory only).
// Apply would start an empty run. Decide writes both records in one
// Decide call, so in one envelope, and never lets this happen; a log that
// holds it is corrupt, and the node stops on it rather than apply it.
func CheckApply(st *FlowState, rec Record) error {
	b, ok := rec.Body.(FlowStarted)
	if !ok || b.ContinuedFrom == "" {
		return nil
	}
	if st == nil || st.FlowID != rec.FlowID || st.RunID != b.ContinuedFrom || st.Opts == nil || st.Opts.carry == nil {
		return fmt.Errorf("%w: run %s of flow %q continues run %s, but no flow_continued_as_new of that run comes before it in its envelope",
			ErrNoCarry, rec.RunID, rec.FlowID, b.ContinuedFrom)
	}
	return nil
}

// event appends a history event stamped with the record's time.
func (st *FlowState) event(rec Record, ev HistoryEvent) {
	ev.ID = len(st.History) + 1
	ev.At = rec.At
	st.History = append(st.History, &ev)
}

// commit applies a handler's staged writes (E6); its history event holds
// them.
func (st *FlowState) commit(s Staged) {
	st.setAttributes(s.Attributes)
	st.publish(s.Publishes)
}

func (st *FlowState) setAttributes(ws []AttributeWrite) {
	if len(ws) == 0 {
		return
	}
	if st.Attributes == nil {
		st.Attributes = map[string]Value{}
	}
	for _, w := range ws {
		st.Attributes[w.Name] = w.Value
	}
}

// publish appends messages to their queues in order, numbering them (E16).
func (st *FlowState) publish(msgs []Publish) {
	if len(msgs) == 0 {
		return
	}
	if st.Channels == nil {
		st.Channels = map[string][]Message{}
	}
	for _, m := range msgs {
		st.LastMessageSeq++
		st.Channels[m.Channel] = append(st.Channels[m.Channel], Message{Seq: st.LastMessageSeq, Value: m.Value})
	}
}

func (st *FlowState) removeStep(id string) {
	st.Steps = slices.DeleteFunc(st.Steps, func(s *StepExec) bool { return s.ID == id })
	delete(st.HeartbeatDetails, id)
}
