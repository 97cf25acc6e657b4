package dex

import (
	"fmt"
	"strings"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
)

// FlowState is a flow execution's live state, as GetFlowState returns
// it.
type FlowState struct {
	// Summary is the flow execution's identity, type, status and times.
	Summary FlowSummary
	// Steps are the active step executions, in the order they were
	// scheduled.
	Steps []StepState
	// Channels are the channels with queued messages.
	Channels []ChannelQueue
	// Attributes are the attributes that have a value.
	Attributes map[string]Value
	// Outputs are the completion outputs committed so far.
	Outputs []StepOutput
	// RetryRunID is the run that retries this failed run under the flow
	// retry policy (WithFlowRetry), empty when there is none.
	RetryRunID string
	// ResetRunID is the run a reset of this run started (Client.Reset),
	// empty when there is none; ResetFromRunID is the run this run was
	// reset from, empty when a reset did not start it.
	ResetRunID     string
	ResetFromRunID string
	// HeldLocks are the attribute locks held now (E30), by attribute
	// name: who holds the lock a locked RPC was refused for (ErrLockHeld).
	HeldLocks []HeldLock
	// ContinuedRunID is the run this run continued as (E37), empty when
	// it did not.
	ContinuedRunID string
}

// HeldLock is one attribute lock and its holder: a step execution's
// running attempt (StepExecutionID, Method, Attempt) or an RPC call
// (RPCName, CallID).
type HeldLock struct {
	Attribute       string
	StepExecutionID string
	Method          TaskKind
	Attempt         int
	RPCName, CallID string
}

// StepPhase is where an active step execution is.
type StepPhase int32

// The step phases.
const (
	// PhaseWaitFor: the WaitFor runs (or waits for its next attempt).
	PhaseWaitFor StepPhase = 1
	// PhaseWaiting: the Wait is stored, its conditions do not hold yet.
	PhaseWaiting StepPhase = 2
	// PhaseExecute: the Execute runs (or waits for its next attempt).
	PhaseExecute StepPhase = 3
)

func (p StepPhase) String() string { return dexpb.StepPhase(p).String() }

// StepState is one active step execution.
type StepState struct {
	StepType, StepExecutionID string
	Phase                     StepPhase
	Input                     Value
	ScheduleTime              time.Time
	// Attempt is the current attempt; zero in PhaseWaiting.
	Attempt AttemptState
	// LastFailure is the current handler's last failed attempt, if any.
	LastFailure *AttemptFailure
	// WaitForFailure is the WaitFor's last failure when the WaitFor
	// exhausted its retries and the step proceeds to Execute.
	WaitForFailure *AttemptFailure
	// SubFlows are the subflow conditions of the step's Wait, by index.
	SubFlows []SubFlowState
}

// AttemptStatus is the state of a step execution's current attempt.
type AttemptStatus int32

// The attempt statuses.
const (
	// AttemptPending: the task waits for a worker.
	AttemptPending AttemptStatus = 1
	// AttemptRunning: a worker runs the task.
	AttemptRunning AttemptStatus = 2
	// AttemptBackoff: the attempt failed; the next one is scheduled.
	AttemptBackoff AttemptStatus = 3
)

func (s AttemptStatus) String() string { return dexpb.AttemptStatus(s).String() }

// AttemptState is a step execution's current attempt.
type AttemptState struct {
	// Method is KindWaitFor or KindExecute.
	Method TaskKind
	// Attempt is the attempt's number, from 1.
	Attempt int
	Status  AttemptStatus
	// FirstAttemptTime is when attempt 1 of this handler started.
	FirstAttemptTime time.Time
	// StartTime and Deadline are set while the attempt runs.
	StartTime, Deadline time.Time
	// NextAttemptTime is set in AttemptBackoff.
	NextAttemptTime time.Time
	// WorkerID is the worker that runs the attempt.
	WorkerID string
}

// ChannelQueue is a channel's queue of messages not yet consumed.
type ChannelQueue struct {
	Channel string
	// Size is the number of queued messages; Messages may hold fewer (the
	// server sends the oldest ones).
	Size     int
	Messages []Value
}

func flowStateOf(p *dexpb.FlowState) *FlowState {
	s := &FlowState{Attributes: map[string]Value{}, Outputs: outputsOf(p.GetOutputs()), RetryRunID: p.GetRetryRunId(),
		ResetRunID: p.GetResetRunId(), ResetFromRunID: p.GetResetFromRunId(), ContinuedRunID: p.GetContinuedRunId()}
	if sum := summaryOf(p.GetSummary()); sum != nil {
		s.Summary = *sum
	}
	for _, l := range p.GetHeldLocks() {
		s.HeldLocks = append(s.HeldLocks, HeldLock{Attribute: l.GetAttribute(), StepExecutionID: l.GetStepExecutionId(),
			Method: TaskKind(l.GetMethod()), Attempt: int(l.GetAttempt()), RPCName: l.GetRpcName(), CallID: l.GetCallId()})
	}
	for _, e := range p.GetStepExecutions() {
		st := StepState{
			StepType:        e.GetStepType(),
			StepExecutionID: e.GetStepExecutionId(),
			Phase:           StepPhase(e.GetPhase()),
			Input:           valueOf(e.GetInput()),
			ScheduleTime:    timeOf(e.GetScheduleTime()),
		}
		if a := e.GetAttempt(); a != nil {
			st.Attempt = AttemptState{
				Method:           TaskKind(a.GetMethod()),
				Attempt:          int(a.GetAttempt()),
				Status:           AttemptStatus(a.GetStatus()),
				FirstAttemptTime: timeOf(a.GetFirstAttemptTime()),
				StartTime:        timeOf(a.GetStartTime()),
				Deadline:         timeOf(a.GetDeadline()),
				NextAttemptTime:  timeOf(a.GetNextAttemptTime()),
				WorkerID:         a.GetWorkerId(),
			}
		}
		if f := e.GetLastFailure(); f != nil {
			st.LastFailure = attemptFailureOf(f)
		}
		if e.GetWaitForFailed() {
			st.WaitForFailure = attemptFailureOf(e.GetWaitForFailure())
		}
		st.SubFlows = subFlowStatesOf(e.GetWait().GetSubFlows())
		s.Steps = append(s.Steps, st)
	}
	for _, q := range p.GetChannels() {
		cq := ChannelQueue{Channel: q.GetChannel(), Size: int(q.GetSize())}
		for _, m := range q.GetMessages() {
			cq.Messages = append(cq.Messages, valueOf(m.GetValue()))
		}
		s.Channels = append(s.Channels, cq)
	}
	for _, a := range p.GetAttributes() {
		s.Attributes[a.GetName()] = valueOf(a.GetValue())
	}
	return s
}

// HistoryEventKind says what a history event records.
type HistoryEventKind int32

// The history event kinds.
const (
	EventFlowStarted HistoryEventKind = iota + 1
	EventWaitForCompleted
	EventWaitForFailed
	EventExecuteCompleted
	EventExecuteFailed
	EventRPCCompleted
	EventChannelPublished
	EventAttributesSet
	EventTimerSkipped
	EventFlowClosed
	EventSubFlowCompleted
	// EventStepCanceled: a decision or an RPC cancelled a step execution
	// (CancelSteps, CancelSiblingSteps); CanceledBy names it.
	EventStepCanceled
	// EventUser: a handler recorded an event with Context.RecordEvent
	// (E32); EventName and EventValue hold it.
	EventUser
)

var eventKindNames = [...]string{"", "FlowStarted", "WaitForCompleted", "WaitForFailed",
	"ExecuteCompleted", "ExecuteFailed", "RPCCompleted", "ChannelPublished",
	"AttributesSet", "TimerSkipped", "FlowClosed", "SubFlowCompleted", "StepCanceled", "UserEvent"}

func (k HistoryEventKind) String() string {
	if k > 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return fmt.Sprintf("HistoryEventKind(%d)", int32(k))
}

// HistoryEvent is one semantic history event. The fields beyond ID,
// Time and Kind are set for the kinds that have them; dexraw.History
// returns every field.
type HistoryEvent struct {
	ID   uint64
	Time time.Time
	Kind HistoryEventKind
	// StepType and StepExecutionID name the step execution, for the
	// WaitFor and Execute events; StepExecutionID also for TimerSkipped
	// and for FlowStarted (the start step's).
	StepType, StepExecutionID string
	// Attempt is the number of the attempt that completed or failed.
	Attempt int
	// Duration is how long the attempt or the RPC ran, for the
	// completed and failed events.
	Duration time.Duration
	// Failure is the failed attempt, for WaitForFailed and ExecuteFailed.
	Failure *AttemptFailure
	// RPCName names the RPC, for RPCCompleted.
	RPCName string
	// Status and Error say how the flow ended, for FlowClosed.
	Status FlowStatus
	Error  *FlowError
	// For FlowStarted (E34): the start step's delay (WithStartDelay, or a
	// retry run's backoff), the run's attempt under WithFlowRetry (1 for
	// the client's start, 0 without a policy) and the failed run it
	// retries.
	StartDelay   time.Duration
	RetryAttempt int
	RetriedRunID string
	// For FlowStarted of a run Client.Reset started (E37): the run it was
	// reset from, the reset's reason and its request ID.
	ResetFromRunID string
	ResetReason    string
	ResetRequestID string
	// ContinuedFromRunID is the run this run continues as new (E37), for
	// FlowStarted.
	ContinuedFromRunID string
	// CanceledBy is the step execution whose decision cancelled this one,
	// or "rpc:<name>", and SiblingsOnly whether CancelSiblingSteps
	// selected it, for StepCanceled.
	CanceledBy   string
	SiblingsOnly bool
	// EventName and EventValue are the event a handler recorded, for
	// EventUser (E32); StepType and StepExecutionID, or RPCName, name the
	// handler.
	EventName  string
	EventValue Value
}

// String renders the event for logs: "#3 ExecuteFailed Charge-1 attempt 2: ...".
func (e HistoryEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", e.ID, e.Kind)
	if e.StepExecutionID != "" {
		b.WriteString(" " + e.StepExecutionID)
	}
	if e.RPCName != "" {
		b.WriteString(" " + e.RPCName)
	}
	if e.Attempt > 0 {
		fmt.Fprintf(&b, " attempt %d", e.Attempt)
	}
	if e.Failure != nil {
		b.WriteString(": " + e.Failure.Error())
	}
	if e.CanceledBy != "" {
		b.WriteString(" by " + e.CanceledBy)
	}
	if e.Kind == EventUser {
		b.WriteString(" " + e.EventName + " " + e.EventValue.String())
	}
	if e.Kind == EventFlowClosed {
		b.WriteString(" " + e.Status.String())
		if e.Error != nil {
			b.WriteString(": " + e.Error.Error())
		}
	}
	return b.String()
}

func historyEventOf(p *dexpb.HistoryEvent) HistoryEvent {
	e := HistoryEvent{ID: p.GetEventId(), Time: timeOf(p.GetTime())}
	failed := func(f *dexpb.StepAttemptFailedEvent) {
		e.StepType, e.StepExecutionID = f.GetStepType(), f.GetStepExecutionId()
		e.Duration = f.GetDuration().AsDuration()
		if f.GetFailure() != nil {
			e.Failure = attemptFailureOf(f.GetFailure())
			e.Attempt = e.Failure.Attempt
		}
	}
	switch ev := p.GetEvent().(type) {
	case *dexpb.HistoryEvent_FlowStarted:
		e.Kind = EventFlowStarted
		e.StepType = ev.FlowStarted.GetStartStep().GetStepType()
		e.StepExecutionID = ev.FlowStarted.GetStartStepExecutionId()
		e.StartDelay = ev.FlowStarted.GetStartDelay().AsDuration()
		e.RetryAttempt, e.RetriedRunID = int(ev.FlowStarted.GetRetryAttempt()), ev.FlowStarted.GetRetriedRunId()
		if r := ev.FlowStarted.GetResetInfo(); r != nil {
			e.ResetFromRunID, e.ResetReason, e.ResetRequestID = r.GetResetRunId(), r.GetReason(), r.GetRequestId()
		}
		e.ContinuedFromRunID = ev.FlowStarted.GetContinuedFromRunId()
	case *dexpb.HistoryEvent_WaitForCompleted:
		e.Kind = EventWaitForCompleted
		c := ev.WaitForCompleted
		e.StepType, e.StepExecutionID, e.Attempt = c.GetStepType(), c.GetStepExecutionId(), int(c.GetAttempt())
		e.Duration = c.GetDuration().AsDuration()
	case *dexpb.HistoryEvent_WaitForFailed:
		e.Kind = EventWaitForFailed
		failed(ev.WaitForFailed)
	case *dexpb.HistoryEvent_ExecuteCompleted:
		e.Kind = EventExecuteCompleted
		c := ev.ExecuteCompleted
		e.StepType, e.StepExecutionID, e.Attempt = c.GetStepType(), c.GetStepExecutionId(), int(c.GetAttempt())
		e.Duration = c.GetDuration().AsDuration()
	case *dexpb.HistoryEvent_ExecuteFailed:
		e.Kind = EventExecuteFailed
		failed(ev.ExecuteFailed)
	case *dexpb.HistoryEvent_RpcCompleted:
		e.Kind = EventRPCCompleted
		e.RPCName = ev.RpcCompleted.GetRpcName()
		e.Duration = ev.RpcCompleted.GetDuration().AsDuration()
	case *dexpb.HistoryEvent_ChannelPublished:
		e.Kind = EventChannelPublished
	case *dexpb.HistoryEvent_AttributesSet:
		e.Kind = EventAttributesSet
	case *dexpb.HistoryEvent_TimerSkipped:
		e.Kind = EventTimerSkipped
		e.StepExecutionID = ev.TimerSkipped.GetStepExecutionId()
	case *dexpb.HistoryEvent_StepCanceled:
		c := ev.StepCanceled
		e.Kind = EventStepCanceled
		e.StepType, e.StepExecutionID = c.GetStepType(), c.GetStepExecutionId()
		e.CanceledBy, e.SiblingsOnly = c.GetCausedBy(), c.GetSiblingsOnly()
	case *dexpb.HistoryEvent_FlowClosed:
		e.Kind = EventFlowClosed
		e.Status = FlowStatus(ev.FlowClosed.GetStatus())
		e.Error = flowErrorOf(ev.FlowClosed.GetError())
	case *dexpb.HistoryEvent_User:
		u := ev.User
		e.Kind = EventUser
		e.StepType, e.StepExecutionID, e.RPCName = u.GetStepType(), u.GetStepExecutionId(), u.GetRpcName()
		e.EventName, e.EventValue = u.GetName(), valueOf(u.GetValue())
	case *dexpb.HistoryEvent_SubFlowCompleted:
		e.Kind = EventSubFlowCompleted
		c := ev.SubFlowCompleted
		e.StepType, e.StepExecutionID = c.GetStepType(), c.GetStepExecutionId()
		e.Status, e.Error = FlowStatus(c.GetResult().GetStatus()), flowErrorOf(c.GetResult().GetError())
	}
	return e
}
