package engine

import (
	"fmt"
	"time"
)

// TimerKind says what a durable timer is for.
type TimerKind string

// Timer kinds.
const (
	TimerFlowTimeout    TimerKind = "FLOW_TIMEOUT"    // E24
	TimerWait           TimerKind = "WAIT"            // a Wait's timer condition (E15)
	TimerAttemptTimeout TimerKind = "ATTEMPT_TIMEOUT" // a running attempt's timeout (E9)
	TimerHeartbeat      TimerKind = "HEARTBEAT"       // a running attempt's heartbeat timeout (E38)
)

// Timer names one durable timer of a run; it is comparable, so the node can
// key its timer wheel on (FlowID, RunID, Timer).
type Timer struct {
	Kind       TimerKind `json:"kind"`
	StepExecID string    `json:"stepExecId,omitempty"`
	Method     Method    `json:"method,omitempty"`  // attempt timeouts
	Attempt    int       `json:"attempt,omitempty"` // attempt timeouts
	Index      int       `json:"index,omitempty"`   // wait timers: the timer index
}

func (t Timer) String() string {
	switch t.Kind {
	case TimerWait:
		return fmt.Sprintf("wait %s timer %d", t.StepExecID, t.Index)
	case TimerAttemptTimeout:
		return fmt.Sprintf("attempt timeout %s %s#%d", t.StepExecID, t.Method, t.Attempt)
	case TimerHeartbeat:
		return fmt.Sprintf("heartbeat timeout %s %s#%d", t.StepExecID, t.Method, t.Attempt)
	default:
		return string(t.Kind)
	}
}

// Effect is what the node does after the batch holding a record is durable.
type Effect interface{ isEffect() }

// DispatchTask: an attempt is scheduled; hand it to a worker serving
// FlowType once NotBefore has passed (W4, W5). For SYNC submit TaskStarted
// first and send on SendTask; for ASYNC send (FlowState.Task) and submit
// TaskStarted with the next batch.
type DispatchTask struct{ TaskRef }

// SendTask: a SYNC attempt's start is durable; send the task now
// (FlowState.Task builds it).
type SendTask struct{ Token Token }

// ArmTimer: submit TimerFired for Timer at or after At. A timer that is no
// longer pending when it fires is refused with ErrTimerNotPending; drop it.
type ArmTimer struct {
	FlowID string    `json:"flowId"`
	RunID  string    `json:"runId"`
	Timer  Timer     `json:"timer"`
	At     time.Time `json:"at"`
	// TokenRunID is, for a HEARTBEAT timer of an attempt a continue-as-new
	// carried (E37), the run its worker's token names, which its
	// heartbeats come under; "" when that is RunID.
	TokenRunID string `json:"tokenRunId,omitempty"`
}

// ReplyRPC: an RPC call committed; answer its caller with Output (E22).
type ReplyRPC struct {
	CallID string
	Output Value
}

// NotifyClosed: the run closed; wake WaitForFlow callers (E25) and drop the
// run's timers and tasks.
type NotifyClosed struct {
	FlowID, RunID string
	Status        Status
}

// NotifySuperseded: a new run replaced Previous as the flow ID's latest run;
// the node may keep the old run's final state for reads (E21: attributes
// stay readable after close).
type NotifySuperseded struct {
	Previous *FlowState
}

func (DispatchTask) isEffect()     {}
func (SendTask) isEffect()         {}
func (ArmTimer) isEffect()         {}
func (ReplyRPC) isEffect()         {}
func (NotifyClosed) isEffect()     {}
func (NotifySuperseded) isEffect() {}
func (CancelTask) isEffect()       {}
