package engine

import (
	"encoding/binary"
	"errors"
	"maps"
	"time"
)

// Token identifies one handed-out attempt (W2). It binds the node epoch that
// handed it out, the run, the step execution, the method and the attempt
// number; an RPC call is named by CallID instead of a step. A result is
// accepted only when its token equals the one of the running attempt.
type Token struct {
	Epoch      uint64 `json:"epoch"`
	FlowID     string `json:"flowId"`
	RunID      string `json:"runId"`
	StepExecID string `json:"stepExecId,omitempty"`
	Method     Method `json:"method"`
	Attempt    int    `json:"attempt,omitempty"`
	CallID     string `json:"callId,omitempty"` // RPC calls only
}

const tokenVersion = 1

// Encode returns the token's opaque wire form.
func (t Token) Encode() []byte {
	b := []byte{tokenVersion}
	b = binary.AppendUvarint(b, t.Epoch)
	for _, s := range []string{t.FlowID, t.RunID, t.StepExecID, string(t.Method), t.CallID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return binary.AppendUvarint(b, uint64(t.Attempt))
}

// ErrBadToken is returned by DecodeToken for bytes that are not a token.
var ErrBadToken = errors.New("engine: malformed task token")

// DecodeToken parses the wire form made by Token.Encode.
func DecodeToken(b []byte) (Token, error) {
	var t Token
	if len(b) == 0 || b[0] != tokenVersion {
		return t, ErrBadToken
	}
	b = b[1:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var ok bool
	if t.Epoch, ok = uv(); !ok {
		return Token{}, ErrBadToken
	}
	var strs [5]string
	for i := range strs {
		n, ok := uv()
		if !ok || n > uint64(len(b)) {
			return Token{}, ErrBadToken
		}
		strs[i], b = string(b[:n]), b[n:]
	}
	t.FlowID, t.RunID, t.StepExecID, t.Method, t.CallID = strs[0], strs[1], strs[2], Method(strs[3]), strs[4]
	a, ok := uv()
	if !ok || len(b) != 0 || a > 1<<31 {
		return Token{}, ErrBadToken
	}
	t.Attempt = int(a)
	return t, nil
}

// Task is what a worker receives (W2).
type Task struct {
	Token      Token            `json:"token"`
	FlowType   string           `json:"flowType"`
	FlowID     string           `json:"flowId"`
	RunID      string           `json:"runId"`
	StepType   string           `json:"stepType,omitempty"`
	StepExecID string           `json:"stepExecId,omitempty"`
	Method     Method           `json:"method"`
	Attempt    int              `json:"attempt,omitempty"`
	FirstAt    time.Time        `json:"firstAt,omitzero"`
	Timeout    time.Duration    `json:"timeout,omitempty"`
	Input      Value            `json:"input"`
	Attributes map[string]Value `json:"attributes,omitempty"`
	// Results are the Wait with what each condition got (Execute, E18).
	Results *StoredWait `json:"results,omitempty"`
	// FiredTimers lists the indexes of the timers that fired (E18).
	FiredTimers []int `json:"firedTimers,omitempty"`
	// WaitForFailed is set for an Execute that runs because WaitFor's
	// retries ran out under PROCEED (E11): the last WaitFor attempt's
	// number, when it failed, and its error.
	WaitForFailed *LastFailure `json:"waitForFailed,omitempty"`
	// RPC only: the RPC's name and the queued message count per channel.
	RPC        string         `json:"rpc,omitempty"`
	QueueSizes map[string]int `json:"queueSizes,omitempty"`
	// WaitFor and Execute only, so that a worker can tell whether a failure
	// of this attempt is its last: the resolved policy's MaxAttempts (0:
	// unlimited), FirstAt plus its MaxTotal (zero: no bound), and the
	// jittered backoff a failure without retry-after waits (nextAttempt).
	MaxAttempts   int           `json:"maxAttempts,omitempty"`
	RetryDeadline time.Time     `json:"retryDeadline,omitzero"`
	RetryDelay    time.Duration `json:"retryDelay,omitempty"`
	// TraceContext is the run's trace context (FlowState.TraceContext).
	TraceContext map[string]string `json:"traceContext,omitempty"`
	// HeartbeatTimeout is the method's heartbeat timeout (0: none), and
	// HeartbeatDetails the details an earlier attempt of the same method
	// last reported (E38).
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
	HeartbeatDetails *Value        `json:"heartbeatDetails,omitempty"`
	// Locals are the step-execution locals its WaitFor wrote (Execute,
	// E32).
	Locals map[string]Value `json:"locals,omitempty"`
}

// Task builds the payload of the running attempt that tok names, with the
// current attributes (E21). The node calls it when it sends the task: for
// SYNC after the AttemptStarted record is durable (SendTask effect), for
// ASYNC right after it decides TaskStarted, on the committed state (the
// attempt is then PENDING there): a handler observes committed state only.
func (st *FlowState) Task(tok Token) (Task, error) {
	s, err := st.startable(tok)
	if err != nil {
		return Task{}, err
	}
	t := Task{
		Token: tok, FlowType: st.FlowType, FlowID: st.FlowID, RunID: st.RunID,
		StepType: s.Type, StepExecID: s.ID, Method: tok.Method, Attempt: tok.Attempt,
		FirstAt: s.Attempt.FirstAt, Timeout: s.policy(tok.Method).Timeout,
		Input: s.Input, Attributes: maps.Clone(st.Attributes), TraceContext: st.TraceContext,
	}
	p := s.policy(tok.Method).Retry
	t.MaxAttempts = p.MaxAttempts
	if p.MaxTotal > 0 {
		t.RetryDeadline = s.Attempt.FirstAt.Add(p.MaxTotal)
	}
	t.HeartbeatTimeout = s.heartbeatTimeout(tok.Method)
	if hd := st.HeartbeatDetails[s.ID]; hd != nil && hd.Method == tok.Method {
		v := hd.Details
		t.HeartbeatDetails = &v
	}
	t.RetryDelay = p.jitteredBackoff(tok.Attempt, retryJitter(st.FlowID, st.RunID, s.ID, tok.Method, tok.Attempt))
	if tok.Method == MethodExecute {
		t.Results = s.Wait.clone()
		if s.Wait != nil {
			t.FiredTimers = s.Wait.FiredTimers()
			t.Locals = s.Wait.Locals
		}
		t.WaitForFailed = s.WaitForFailed
	}
	return t, nil
}

// startable returns the step whose current attempt tok names, scheduled or
// running; a running attempt must carry tok's epoch.
func (st *FlowState) startable(tok Token) (*StepExec, error) {
	if !st.Running() || tok.FlowID != st.FlowID || tok.RunID != st.RunID {
		return nil, staleErr("run %s/%s is not active", tok.FlowID, tok.RunID)
	}
	s := st.Step(tok.StepExecID)
	if s == nil || s.Phase == PhaseWaiting || s.Attempt.Method != tok.Method || s.Attempt.Number != tok.Attempt {
		return nil, staleErr("step %s has no current %s attempt %d", tok.StepExecID, tok.Method, tok.Attempt)
	}
	if s.Attempt.State == AttemptRunning && s.Attempt.Epoch != tok.Epoch {
		return nil, staleErr("attempt %d of %s was handed out in epoch %d, token has %d",
			tok.Attempt, tok.StepExecID, s.Attempt.Epoch, tok.Epoch)
	}
	return s, nil
}

// running returns the step whose running attempt tok names exactly (W2).
func (st *FlowState) running(tok Token) (*StepExec, error) {
	s, err := st.startable(tok)
	if err != nil {
		return nil, err
	}
	if s.Attempt.State != AttemptRunning {
		return nil, staleErr("attempt %d of %s is not running", tok.Attempt, tok.StepExecID)
	}
	return s, nil
}
