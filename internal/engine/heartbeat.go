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
// Method reported, the attempt that reported them and when they were
// logged. (Kept here rather than in Attempt, so that a step without
// heartbeat details costs nothing in its state.)
type HeartbeatDetails struct {
	Method  Method    `json:"method"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Details Value     `json:"details"`
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
	if hd := d.st.HeartbeatDetails[s.ID]; hd != nil && hd.Method == c.Token.Method && hd.Attempt == c.Token.Attempt &&
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
	h := s.heartbeatTimeout(t.Method)
	if h <= 0 {
		return timerNotPending("%s: the method has no heartbeat timeout", t)
	}
	if at := d.st.heartbeatDue(s); d.now.Before(at) {
		return &Error{Code: CodeFailedPrecondition, Reason: ErrTimerNotDue,
			Message: fmt.Sprintf("%s is due at %s", t, at.Format(time.RFC3339Nano))}
	}
	d.failAttempt(s, Failure{Type: FailureHeartbeat,
		Message: fmt.Sprintf("attempt %d of %s sent no heartbeat for %v", t.Attempt, t.Method, h)}, nil)
	return nil
}

// heartbeatDue is when s's running attempt's heartbeat timer fires at the
// earliest: its last logged heartbeat (else its start) plus the timeout.
func (st *FlowState) heartbeatDue(s *StepExec) time.Time {
	last := s.Attempt.StartedAt
	if hd := st.HeartbeatDetails[s.ID]; hd != nil && hd.Method == s.Attempt.Method && hd.Attempt == s.Attempt.Number && hd.At.After(last) {
		last = hd.At
	}
	return last.Add(s.heartbeatTimeout(s.Attempt.Method))
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
	if st.HeartbeatDetails == nil {
		st.HeartbeatDetails = map[string]*HeartbeatDetails{}
	}
	st.HeartbeatDetails[s.ID] = &HeartbeatDetails{Method: b.Method, Attempt: b.Attempt, At: rec.At, Details: b.Details}
	return []Effect{ArmTimer{FlowID: st.FlowID, RunID: st.RunID, Timer: heartbeatTimer(s), At: st.heartbeatDue(s),
		TokenRunID: st.carriedRun(s)}}
}
