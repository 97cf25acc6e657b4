package engine

import "time"

// EventType names a history event (E26).
type EventType string

// History event types (E26).
const (
	EventFlowStarted      EventType = "FLOW_STARTED"
	EventWaitForCompleted EventType = "WAIT_FOR_COMPLETED"
	EventWaitForFailed    EventType = "WAIT_FOR_FAILED"
	EventExecuteCompleted EventType = "EXECUTE_COMPLETED"
	EventExecuteFailed    EventType = "EXECUTE_FAILED"
	EventRPCCompleted     EventType = "RPC_COMPLETED"
	EventChannelPublished EventType = "CHANNEL_PUBLISHED"
	EventFlowClosed       EventType = "FLOW_CLOSED"
)

// HistoryEvent is one semantic event of a run (E26). IDs count from 1 and
// serve as paging cursors.
type HistoryEvent struct {
	ID         int           `json:"id"`
	At         time.Time     `json:"at"`
	Type       EventType     `json:"type"`
	StepExecID string        `json:"stepExecId,omitempty"`
	StepType   string        `json:"stepType,omitempty"`
	Attempt    int           `json:"attempt,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`
	Failure    *Failure      `json:"failure,omitempty"`
	Decision   DecisionKind  `json:"decision,omitempty"`
	// Channel published: the channel, how many messages, and who published
	// (a step execution ID, "rpc:<name>", or "" for a client).
	Channel string     `json:"channel,omitempty"`
	Count   int        `json:"count,omitempty"`
	Source  string     `json:"source,omitempty"`
	RPC     string     `json:"rpc,omitempty"`
	Close   *CloseInfo `json:"close,omitempty"`
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
	events = append([]HistoryEvent(nil), st.History[after:end]...)
	if end < len(st.History) {
		next = end
	}
	return events, next
}
