package engine

import (
	"maps"
	"slices"
	"time"
)

// Phase is where a step execution stands (E26).
type Phase string

// Step execution phases.
const (
	PhaseWaitFor Phase = "WAIT_FOR" // a WaitFor attempt is scheduled or running
	PhaseWaiting Phase = "WAITING"  // its Wait is stored; conditions pending
	PhaseExecute Phase = "EXECUTE"  // an Execute attempt is scheduled or running
)

// AttemptState is where the current attempt of a step execution stands.
type AttemptState string

// Attempt states.
const (
	// AttemptPending: waiting to be handed to a worker, not before
	// NotBefore (retry backoff). Such attempts are the pending tasks (W5).
	AttemptPending AttemptState = "PENDING"
	// AttemptRunning: handed to a worker (its start is durable, W4) under a
	// task token of Epoch.
	AttemptRunning AttemptState = "RUNNING"
)

// Attempt is the current attempt of a step execution's method (E9).
type Attempt struct {
	Method    Method       `json:"method"`
	Number    int          `json:"number"`
	FirstAt   time.Time    `json:"firstAt"` // first attempt of this method
	State     AttemptState `json:"state"`
	NotBefore time.Time    `json:"notBefore"`
	Epoch     uint64       `json:"epoch,omitempty"`
	Async     bool         `json:"async,omitempty"`
	StartedAt time.Time    `json:"startedAt,omitzero"`
	TimeoutAt time.Time    `json:"timeoutAt,omitzero"`
}

// LastFailure is the last failure of a step execution's current method (E14).
type LastFailure struct {
	Method  Method    `json:"method"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Failure
}

// StepExec is one active step execution. Step executions leave the state
// when they end (their history stays in History).
type StepExec struct {
	ID         string          `json:"id"` // <StepType>-<n> (E1)
	Type       string          `json:"type"`
	Input      Value           `json:"input"`
	ParentID   string          `json:"parentId,omitempty"` // the step or RPC that moved here
	CreatedAt  time.Time       `json:"createdAt"`
	Options    ResolvedOptions `json:"options"`
	HasWaitFor bool            `json:"hasWaitFor,omitempty"`
	// Override: see StepCreated.Override.
	Override *StepOptions `json:"override,omitempty"`
	Phase    Phase        `json:"phase"`
	Attempt  Attempt      `json:"attempt"`
	Wait     *StoredWait  `json:"wait,omitempty"`
	// WaitForFailed is set when WaitFor's retries ran out under PROCEED:
	// Execute runs with this error (E11), the WaitFor attempt that failed
	// last and when it failed. (A state stored before it carried the
	// attempt and time decodes with them zero.)
	WaitForFailed *LastFailure `json:"waitForFailed,omitempty"`
	LastFailure   *LastFailure `json:"lastFailure,omitempty"`
}

// heartbeatTimeout is method m's heartbeat timeout, 0 when none (E38).
func (s *StepExec) heartbeatTimeout(m Method) time.Duration {
	h := s.Options.HeartbeatTimeouts()
	if m == MethodWaitFor {
		return h.WaitFor
	}
	return h.Execute
}

// policy returns the resolved policy of method m.
func (s *StepExec) policy(m Method) MethodPolicy {
	if m == MethodWaitFor {
		return s.Options.WaitFor
	}
	return s.Options.Execute
}

// FlowState is everything durable about one flow run. The node stores it as
// one value per flow ID (the latest run). It changes only through Apply.
type FlowState struct {
	FlowID         string          `json:"flowId"`
	RunID          string          `json:"runId"`
	FlowType       string          `json:"flowType"`
	Status         Status          `json:"status"`
	StartedAt      time.Time       `json:"startedAt"`
	ClosedAt       time.Time       `json:"closedAt,omitzero"`
	StartRequestID string          `json:"startRequestId,omitempty"` // E3 idempotence
	PreviousRunID  string          `json:"previousRunId,omitempty"`
	Definition     *FlowDefinition `json:"definition,omitempty"`
	Config         *StepOptions    `json:"config,omitempty"` // the flow's config (E13)
	// TimeoutAt is the flow timeout's fire time, zero when none or fired (E24).
	TimeoutAt     time.Time     `json:"timeoutAt,omitzero"`
	TimeoutPolicy TimeoutPolicy `json:"timeoutPolicy,omitempty"`
	// StepCounters holds the last n used per step type (E1).
	StepCounters map[string]int `json:"stepCounters,omitempty"`
	// Steps are the active step executions in creation order.
	Steps []*StepExec `json:"steps,omitempty"`
	// Channels are the queued (not yet consumed) messages per channel (E16).
	Channels       map[string][]Message `json:"channels,omitempty"`
	LastMessageSeq uint64               `json:"lastMessageSeq,omitempty"`
	Attributes     map[string]Value     `json:"attributes,omitempty"`
	Outputs        []Output             `json:"outputs,omitempty"`
	// GracefulRequested: some branch completed gracefully; the flow
	// completes when no step execution is left (E5).
	GracefulRequested bool       `json:"gracefulRequested,omitempty"`
	Close             *CloseInfo `json:"close,omitempty"`
	// PublishRequestIDs are the request IDs of the last accepted client
	// publishes, oldest first, at most PublishRequestIDWindow (E16).
	PublishRequestIDs []string `json:"publishRequestIds,omitempty"`
	// RPCCallIDs are the call IDs of the run's last committed RPCs, oldest
	// first, at most RPCCallIDWindow (E22): a result sent again for one of
	// them commits nothing.
	RPCCallIDs []string `json:"rpcCallIds,omitempty"`
	// RPCLocks are the lock sets RPC calls hold, in acquisition order
	// (E30, locks.go). Step attempts' locks are not listed: a running
	// attempt holds its method's lock set.
	RPCLocks []RPCLock `json:"rpcLocks,omitempty"`
	// TraceContext is the run's start's trace context, nil when the start
	// was not traced (FlowStarted.TraceContext). Never changed after the
	// start, so clones share it.
	TraceContext map[string]string `json:"traceContext,omitempty"`
	// Opts holds the run's flow-level options (E34), nil for a run that
	// uses none: one pointer, so runs without them copy 8 bytes more per
	// clone, not the options.
	Opts *RunOptions `json:"flowOptions,omitempty"`
	// Parent names the parent of a subflow run (E31), nil otherwise.
	// Never changed after the start, so clones share it.
	Parent *ParentRef `json:"parent,omitempty"`
	// History is the run's semantic history (E26). Events are never
	// changed once appended, so clones share them.
	History []*HistoryEvent `json:"history,omitempty"`
	// HeartbeatDetails are the last heartbeat details of active step
	// executions, by ID (E38); the next attempt of the same method
	// receives them. Here rather than in StepExec so that steps without
	// them cost nothing; values are replaced, never changed in place, so
	// clones share them.
	HeartbeatDetails map[string]*HeartbeatDetails `json:"heartbeatDetails,omitempty"`
}

// PublishRequestIDWindow is how many accepted publish request IDs a run
// remembers (E16): a retry is recognised as long as fewer than this many
// publishes with other request IDs were accepted since. It bounds the
// state (with MaxRequestIDBytes: 256 KiB at most). Apply enforces it, so it
// is part of the record semantics: changing it changes what a replay
// rebuilds.
const PublishRequestIDWindow = 1000

// MaxRequestIDBytes is the longest publish request ID accepted (E28).
const MaxRequestIDBytes = 256

// RPCCallIDWindow is how many committed RPC call IDs a run remembers
// (E22): a result sent again for a call is recognised as long as fewer
// than this many other calls of the run committed since. Like
// PublishRequestIDWindow it bounds the state (with MaxRequestIDBytes:
// 256 KiB at most) and is part of the record semantics.
const RPCCallIDWindow = 1000

// rpcCommitted reports whether the RPC call with ID id committed in this
// run (and is still remembered).
func (st *FlowState) rpcCommitted(id string) bool {
	return id != "" && slices.Contains(st.RPCCallIDs, id)
}

// rememberRPC adds a committed RPC call ID, forgetting the oldest beyond
// the window.
func (st *FlowState) rememberRPC(id string) {
	st.RPCCallIDs = append(st.RPCCallIDs, id)
	if n := len(st.RPCCallIDs) - RPCCallIDWindow; n > 0 {
		st.RPCCallIDs = st.RPCCallIDs[n:]
	}
}

// publishAccepted reports whether a client publish with request ID id was
// accepted (and is still remembered).
func (st *FlowState) publishAccepted(id string) bool {
	return id != "" && slices.Contains(st.PublishRequestIDs, id)
}

// rememberPublish adds an accepted publish request ID, forgetting the
// oldest beyond the window.
func (st *FlowState) rememberPublish(id string) {
	st.PublishRequestIDs = append(st.PublishRequestIDs, id)
	if n := len(st.PublishRequestIDs) - PublishRequestIDWindow; n > 0 {
		st.PublishRequestIDs = st.PublishRequestIDs[n:]
	}
}

// Running reports whether the run is active.
func (st *FlowState) Running() bool { return st != nil && st.Status == StatusRunning }

// Step returns the active step execution with the given ID, or nil.
func (st *FlowState) Step(id string) *StepExec {
	if st == nil {
		return nil
	}
	for _, s := range st.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// Clone returns a deep copy of st. Payload byte slices and history events
// are shared: the engine never modifies one in place.
func (st *FlowState) Clone() *FlowState {
	if st == nil {
		return nil
	}
	c := *st
	c.StepCounters = maps.Clone(st.StepCounters)
	c.Steps = make([]*StepExec, len(st.Steps))
	for i, s := range st.Steps {
		cs := *s
		cs.Wait = s.Wait.clone()
		c.Steps[i] = &cs
	}
	if st.Channels != nil {
		c.Channels = make(map[string][]Message, len(st.Channels))
		for k, q := range st.Channels {
			c.Channels[k] = clip(q)
		}
	}
	c.Attributes = maps.Clone(st.Attributes)
	c.Outputs = clip(st.Outputs)
	c.PublishRequestIDs = clip(st.PublishRequestIDs)
	c.RPCCallIDs = clip(st.RPCCallIDs)
	c.RPCLocks = clip(st.RPCLocks)
	c.History = clip(st.History)
	c.HeartbeatDetails = maps.Clone(st.HeartbeatDetails)
	if st.Close != nil {
		ci := *st.Close
		c.Close = &ci
	}
	if st.Opts != nil {
		o := *st.Opts
		c.Opts = &o
	}
	return &c
}

// clip returns s with its capacity cut to its length, so that an append to
// a copy never writes into storage the original can see.
func clip[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return s[:len(s):len(s)]
}

// TaskRef names a task the node must hand to a worker: a scheduled attempt.
type TaskRef struct {
	FlowID     string     `json:"flowId"`
	RunID      string     `json:"runId"`
	FlowType   string     `json:"flowType"`
	StepExecID string     `json:"stepExecId"`
	StepType   string     `json:"stepType"`
	Method     Method     `json:"method"`
	Attempt    int        `json:"attempt"`
	NotBefore  time.Time  `json:"notBefore"`
	Durability Durability `json:"durability"`
}

// PendingTasks returns the attempts that wait to be handed to a worker, in
// step creation order (W5, T4): the node dispatches each once its NotBefore
// has passed and a worker serving FlowType is connected.
func (st *FlowState) PendingTasks() []TaskRef {
	if !st.Running() {
		return nil
	}
	var out []TaskRef
	for _, s := range st.Steps {
		if s.Phase == PhaseWaiting || s.Attempt.State != AttemptPending {
			continue
		}
		out = append(out, st.taskRef(s))
	}
	return out
}

func (st *FlowState) taskRef(s *StepExec) TaskRef {
	return TaskRef{
		FlowID: st.FlowID, RunID: st.RunID, FlowType: st.FlowType,
		StepExecID: s.ID, StepType: s.Type, Method: s.Attempt.Method,
		Attempt: s.Attempt.Number, NotBefore: s.Attempt.NotBefore,
		Durability: s.policy(s.Attempt.Method).Durability,
	}
}

// Timers returns every armed timer of the run with its fire time: the flow
// timeout, wait timers and attempt timeouts. After a restart the node arms
// them all; those already due fire at once (E20, T5).
func (st *FlowState) Timers() []ArmTimer {
	if !st.Running() {
		return nil
	}
	var out []ArmTimer
	arm := func(t Timer, at time.Time) {
		out = append(out, ArmTimer{FlowID: st.FlowID, RunID: st.RunID, Timer: t, At: at})
	}
	if !st.TimeoutAt.IsZero() {
		arm(Timer{Kind: TimerFlowTimeout}, st.TimeoutAt)
	}
	if at := st.handlerDeadline(); !at.IsZero() {
		arm(Timer{Kind: TimerTimeoutHandler}, at)
	}
	for _, s := range st.Steps {
		if s.Phase == PhaseWaiting {
			for i, c := range s.Wait.Conditions {
				if s.Wait.pendingTimer(i) {
					arm(Timer{Kind: TimerWait, StepExecID: s.ID, Index: c.TimerIndex}, c.FireAt)
				}
			}
			continue
		}
		if s.Attempt.State == AttemptRunning {
			arm(attemptTimer(s), s.Attempt.TimeoutAt)
			if s.heartbeatTimeout(s.Attempt.Method) > 0 {
				arm(heartbeatTimer(s), st.heartbeatDue(s))
				out[len(out)-1].TokenRunID = st.carriedRun(s)
			}
		}
	}
	return out
}

func attemptTimer(s *StepExec) Timer {
	return Timer{Kind: TimerAttemptTimeout, StepExecID: s.ID, Method: s.Attempt.Method, Attempt: s.Attempt.Number}
}

// Summary is the identity and status of a run (E26), and what ListFlows
// filters on (E27).
type Summary struct {
	FlowID    string    `json:"flowId"`
	RunID     string    `json:"runId"`
	FlowType  string    `json:"flowType"`
	Status    Status    `json:"status"`
	StartedAt time.Time `json:"startedAt"`
	ClosedAt  time.Time `json:"closedAt,omitzero"`
	// ParentFlowID is the parent's flow ID for a subflow run (E31).
	ParentFlowID string `json:"parentFlowId,omitempty"`
}

// Summary returns the run's summary.
func (st *FlowState) Summary() Summary {
	s := Summary{FlowID: st.FlowID, RunID: st.RunID, FlowType: st.FlowType,
		Status: st.Status, StartedAt: st.StartedAt, ClosedAt: st.ClosedAt}
	if st.Parent != nil {
		s.ParentFlowID = st.Parent.FlowID
	}
	return s
}

// Result is what WaitForFlow returns once the run is closed (E7, E25).
type Result struct {
	Summary
	Outputs   []Output  `json:"outputs,omitempty"`
	ErrorType ErrorType `json:"errorType,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// Result returns the run's result; ok is false while it is running.
func (st *FlowState) Result() (r Result, ok bool) {
	if st.Running() || st.Close == nil {
		return Result{}, false
	}
	return Result{Summary: st.Summary(), Outputs: slices.Clone(st.Outputs),
		ErrorType: st.Close.ErrorType, Message: st.Close.Message}, true
}

// QueueSizes returns the number of queued messages per channel (E22).
func (st *FlowState) QueueSizes() map[string]int {
	out := make(map[string]int, len(st.Channels))
	for k, q := range st.Channels {
		out[k] = len(q)
	}
	return out
}
