package engine

import (
	"fmt"
	"time"
)

// Heartbeat reports progress details of a running attempt (E38). The node
// submits it only for a heartbeat that carries details: a heartbeat
// without details moves the attempt's heartbeat timer in the node's
// memory and logs nothing. Details that equal the recorded ones decide no
// records.
type Heartbeat struct {
	Token   Token
	Details Value
}

// AttemptHeartbeat records a running attempt's latest heartbeat details
// (E38); the next attempt of the same method receives them
// (Task.HeartbeatDetails). It also moves the attempt's heartbeat timer.
type AttemptHeartbeat struct {
	StepExecID string `json:"stepExecId"`
	Method     Method `json:"method"`
	Attempt    int    `json:"attempt"`
	Details    Value  `json:"details"`
}

// HeartbeatDetails are the last details a step execution's attempts of
// Method reported, and the attempt that reported them.
type HeartbeatDetails struct {
	Method  Method `json:"method"`
	Attempt int    `json:"attempt"`
	Details Value  `json:"details"`
}

// heartbeat decides a Heartbeat with details.
func (d *decider) heartbeat(c Heartbeat) error {
	if c.Token.Method == MethodRPC {
		return invalidArg("token.method", "an RPC has no heartbeat details")
	}
	if err := d.stepToken(c.Token); err != nil {
		return err
	}
	s, err := d.st.running(c.Token)
	if err != nil {
		return err
	}
	if err := d.checkValue("details", c.Details); err != nil {
		return err
	}
	if hd := s.HeartbeatDetails; hd != nil && hd.Method == c.Token.Method && hd.Attempt == c.Token.Attempt &&
		hd.Details.Type == c.Details.Type && string(hd.Details.Data) == string(c.Details.Data) && hd.Details.Ref == c.Details.Ref {
		return nil
	}
	d.emit(AttemptHeartbeat{StepExecID: s.ID, Method: c.Token.Method, Attempt: c.Token.Attempt, Details: c.Details})
	return nil
}

// heartbeatTimedOut decides a heartbeat timer that fired: the running
// attempt fails with HEARTBEAT and is retried by its policy. The node
// moves the timer with every heartbeat it receives, so a fire means none
// came for the timeout; one fired before the last logged heartbeat plus
// the timeout is not due.
func (d *decider) heartbeatTimedOut(t Timer) error {
	s := d.st.Step(t.StepExecID)
	if s == nil || s.Phase == PhaseWaiting || s.Attempt.State != AttemptRunning ||
		s.Attempt.Method != t.Method || s.Attempt.Number != t.Attempt {
		return timerNotPending("%s: attempt is not running", t)
	}
	h := s.policy(t.Method).HeartbeatTimeout
	if h <= 0 {
		return timerNotPending("%s: the method has no heartbeat timeout", t)
	}
	if at := s.heartbeatDue(); d.now.Before(at) {
		return &Error{Code: CodeFailedPrecondition, Reason: ErrTimerNotDue,
			Message: fmt.Sprintf("%s is due at %s", t, at.Format(time.RFC3339Nano))}
	}
	d.failAttempt(s, Failure{Type: FailureHeartbeat,
		Message: fmt.Sprintf("attempt %d of %s sent no heartbeat for %v", t.Attempt, t.Method, h)}, nil)
	return nil
}

// heartbeatDue is when the running attempt's heartbeat timer fires at the
// earliest: its last logged heartbeat (else its start) plus the timeout.
func (s *StepExec) heartbeatDue() time.Time {
	last := s.Attempt.StartedAt
	if s.Attempt.HeartbeatAt.After(last) {
		last = s.Attempt.HeartbeatAt
	}
	return last.Add(s.policy(s.Attempt.Method).HeartbeatTimeout)
}

func heartbeatTimer(s *StepExec) Timer {
	return Timer{Kind: TimerHeartbeat, StepExecID: s.ID, Method: s.Attempt.Method, Attempt: s.Attempt.Number}
}

// applyHeartbeat applies an attempt_heartbeat record.
func (st *FlowState) applyHeartbeat(rec Record, b AttemptHeartbeat) []Effect {
	s := st.Step(b.StepExecID)
	if s == nil || s.Attempt.Method != b.Method || s.Attempt.Number != b.Attempt || s.Attempt.State != AttemptRunning {
		return nil
	}
	s.Attempt.HeartbeatAt = rec.At
	s.HeartbeatDetails = &HeartbeatDetails{Method: b.Method, Attempt: b.Attempt, Details: b.Details}
	return []Effect{ArmTimer{FlowID: st.FlowID, RunID: st.RunID, Timer: heartbeatTimer(s), At: s.heartbeatDue()}}
}
