package engine

import "time"

// EventType names a history event (E26).
type EventType string

// History event types (E26). They map one to one to the kinds of the API's
// HistoryEvent.
const (
	EventFlowStarted      EventType = "FLOW_STARTED"
	EventWaitForCompleted EventType = "WAIT_FOR_COMPLETED"
	EventWaitForFailed    EventType = "WAIT_FOR_FAILED"
	EventExecuteCompleted EventType = "EXECUTE_COMPLETED"
	EventExecuteFailed    EventType = "EXECUTE_FAILED"
	EventRPCCompleted     EventType = "RPC_COMPLETED"
	EventChannelPublished EventType = "CHANNEL_PUBLISHED"
	EventAttributesSet    EventType = "ATTRIBUTES_SET"
	EventTimerSkipped     EventType = "TIMER_SKIPPED"
	EventFlowClosed       EventType = "FLOW_CLOSED"
	EventSubFlowCompleted EventType = "SUB_FLOW_COMPLETED" // E31
	EventStepCanceled     EventType = "STEP_CANCELED"      // E29
	EventUser             EventType = "USER_EVENT"         // E32
)

// HistoryEvent is one semantic event of a run (E26). IDs count from 1
// without gaps and serve as paging cursors. An event keeps the values its
// API message carries (see "History" in the package documentation); which
// fields are set depends on Type.
type HistoryEvent struct {
	ID   int       `json:"id"`
	At   time.Time `json:"at"`
	Type EventType `json:"type"`
	// The step execution of WaitFor and Execute events and TIMER_SKIPPED.
	StepExecID string `json:"stepExecId,omitempty"`
	StepType   string `json:"stepType,omitempty"`
	// Attempt (WaitFor and Execute) and duration of a completion or failure.
	Attempt  int           `json:"attempt,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	// Failure of a failed attempt, and when the retry is due: zero when the
	// retries ran out and the failure policy applied (E9-E12).
	Failure       *Failure  `json:"failure,omitempty"`
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	// Wait is the Wait a WaitFor returned, as stored (absolute fire times)
	// and before any condition was satisfied; nil means no wait.
	Wait *StoredWait `json:"wait,omitempty"`
	// Decision is an Execute's decision.
	Decision *Decision `json:"decision,omitempty"`
	// RPC_COMPLETED: the RPC, its input, output and movements.
	RPC       string     `json:"rpc,omitempty"`
	Input     Value      `json:"input,omitzero"`
	Output    Value      `json:"output,omitzero"`
	Movements []Movement `json:"movements,omitempty"`
	// Scheduled are the step execution IDs given to an Execute's or an
	// RPC's movements, in order.
	Scheduled []string `json:"scheduled,omitempty"`
	// Staged are the writes that committed with a WaitFor, Execute or
	// RPC. USER_EVENT: its one event (E32), with StepExecID and StepType
	// naming a step handler, RPC an RPC handler.
	Staged Staged `json:"staged,omitzero"`
	// CHANNEL_PUBLISHED (client publishes only: a handler's publishes are
	// in its completion's Staged): the messages in order and the request ID.
	Publishes []Publish `json:"publishes,omitempty"`
	RequestID string    `json:"requestId,omitempty"`
	// ATTRIBUTES_SET (client writes only).
	Attributes []AttributeWrite `json:"attributes,omitempty"`
	// TIMER_SKIPPED: the timer a SkipTimer fired (E19).
	Timer *SkippedTimer `json:"timer,omitempty"`
	// FLOW_STARTED: what the start passed.
	Start *StartInfo `json:"start,omitempty"`
	// FLOW_CLOSED: how the run closed (its outputs are FlowState.Outputs).
	Close *CloseInfo `json:"close,omitempty"`
	// SUB_FLOW_COMPLETED: the subflow condition and its child's result.
	SubFlow *SubFlowEvent `json:"subFlow,omitempty"`
	// STEP_CANCELED: the selector that took the step execution and the
	// decision (step execution or RPC) that caused it; RPC_COMPLETED: the
	// step types the RPC cancelled (E29). One pointer for both, so that
	// the event (allocated for every event of every flow) does not grow.
	Canceled *CancelInfo `json:"canceled,omitempty"`
}

// StartInfo is what a FLOW_STARTED event keeps of the start that the run's
// own fields do not (FlowType, StartRequestID and TimeoutPolicy are there).
type StartInfo struct {
	// StartStep is the start step as given (its options are the
	// per-movement override), nil when the flow has none.
	StartStep       *Movement        `json:"startStep,omitempty"`
	StartStepExecID string           `json:"startStepExecId,omitempty"`
	Attributes      []AttributeWrite `json:"attributes,omitempty"`
	Timeout         time.Duration    `json:"timeout,omitempty"`
	IDReusePolicy   IDReusePolicy    `json:"idReusePolicy,omitempty"`
	// TerminatedRunID is the running run this start terminated under
	// TERMINATE_IF_RUNNING.
	TerminatedRunID string `json:"terminatedRunId,omitempty"`
	// Flow-level options (E34): the start delay; under a flow retry
	// policy the run's attempt (1 for the client's start) and the failed
	// run it retries.
	StartDelay   time.Duration `json:"startDelay,omitempty"`
	RetryAttempt int           `json:"retryAttempt,omitempty"`
	RetriedRunID string        `json:"retriedRunId,omitempty"`
	// Reset links a reset run to the run it was reset from, with the
	// point, the reason and the state at the point (E37). Never changed,
	// so the record and the event share it.
	Reset *ResetStart `json:"reset,omitempty"`
}

// SkippedTimer names a timer condition of a Wait (E19).
type SkippedTimer struct {
	Index int    `json:"index"` // among the Wait's timer conditions
	ID    string `json:"id,omitempty"`
}

// HistoryPage returns up to limit events with IDs greater than after, and
// the cursor for the next page (0 when there is none).
func (st *FlowState) HistoryPage(after, limit int) (events []HistoryEvent, next int) {
	if after < 0 {
		after = 0
	}
	if after >= len(st.History) || limit <= 0 {
		return nil, 0
	}
	end := min(after+limit, len(st.History))
	events = make([]HistoryEvent, 0, end-after)
	for _, ev := range st.History[after:end] {
		events = append(events, *ev)
	}
	if end < len(st.History) {
		next = end
	}
	return events, next
}
