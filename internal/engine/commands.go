package engine

import "time"

// Command is an input to Decide. Everything random or time-dependent except
// `now` (run IDs, epochs, call IDs) is chosen by the caller and carried in
// the command.
type Command interface{ isCommand() }

// StartFlow starts a run (E2, E3). The node passes the flow ID's latest run
// as st (nil when there is none). Records: FlowClosed of the old run under
// TERMINATE_IF_RUNNING, then FlowStarted and the start step's records. No
// records and no error means an idempotent retry of the latest run's start:
// answer with st.RunID.
type StartFlow struct {
	FlowID    string
	FlowType  string
	RunID     string // chosen by the node, unique
	RequestID string // the client's request ID; optional
	// StartStep is optional: a flow without one is driven by RPCs (E2).
	StartStep    string
	Input        Value
	StartOptions *StepOptions // per-movement override for the start step
	// Config is the flow's config: options for every step below the
	// step's own (E13).
	Config        *StepOptions
	Timeout       time.Duration // 0: none (E24)
	TimeoutPolicy TimeoutPolicy // "" = FAIL (HANDLER with TimeoutHandler)
	// Flow-level options (E34, flowopts.go). StartDelay: the first step
	// runs after it (the flow exists at once). Retry: a failed run starts
	// again under this policy (nil: never). TimeoutHandler: the step a
	// HANDLER timeout runs.
	StartDelay     time.Duration
	Retry          *RetryOptions
	TimeoutHandler *TimeoutHandler
	Attributes     []AttributeWrite
	IDReusePolicy  IDReusePolicy
	// Definition is the flow type's registered definition, nil when no
	// worker has registered the type yet (see FlowDefinition).
	Definition *FlowDefinition
	// InputChecked says the caller checked Input against this very
	// Definition with CheckStartInput, so Decide does not check it again:
	// a large input's shape is checked beside the node's single sequencer,
	// not on it (issue 11). Never logged.
	InputChecked bool
	// TraceContext is the start's trace context (propagation carrier
	// keys such as traceparent), nil when the start was not traced. It is
	// kept in the run (FlowState.TraceContext) and carried by its tasks.
	TraceContext map[string]string
	// Parent is set by the node only, for the start of a subflow (E31):
	// the flow ID is then the derived one, and SubFlowReuse replaces
	// IDReusePolicy.
	Parent       *ParentRef
	SubFlowReuse SubFlowReuse
}

// SetDefinition stores (or replaces) the run's flow definition, for runs
// started before a worker registered their type. On a run that had none,
// the step executions that exist take the options they resolve to under
// the definition (the declaration governs them as if it had been there at
// their creation), and one whose WaitFor the definition says it has not
// and that no worker holds goes straight to Execute. Defaults are the
// worker's declared default step options: they become the flow's config
// (E13) when the run has none.
type SetDefinition struct {
	FlowID     string
	Definition *FlowDefinition
	Defaults   *StepOptions
}

// StopFlow closes a running flow (E23); active step executions are
// cancelled and their late results refused.
type StopFlow struct {
	FlowID string
	RunID  string   // optional; when set it must be the latest run
	Kind   StopKind // "" = CANCEL
	Reason string
}

// PublishToChannel appends a batch of messages to channels, in order (E16).
// A RequestID the run already accepted (one of the last
// PublishRequestIDWindow accepted client publishes) makes it a retry: no
// records and no error, and the node answers "duplicate" once the earlier
// publish is durable. An empty RequestID is never deduplicated.
type PublishToChannel struct {
	FlowID    string
	RunID     string // optional
	RequestID string // optional; at most MaxRequestIDBytes
	Messages  []Publish
}

// SetAttributes writes a batch of attributes atomically (E21).
type SetAttributes struct {
	FlowID     string
	RunID      string // optional
	Attributes []AttributeWrite
}

// SkipTimer fires one pending wait timer of a step execution now (E19), by
// condition ID when TimerID is set, else by timer index.
type SkipTimer struct {
	FlowID     string
	RunID      string // optional
	StepExecID string
	TimerID    string
	TimerIndex int
}

// TaskStarted logs that an attempt is handed to a worker under Token (W4):
// for SYNC before it is sent, for ASYNC with the next batch after.
type TaskStarted struct {
	Token Token
	Async bool
}

// WaitForResult is a WaitFor attempt's result: a Wait, or nil for none
// (E4), and its staged writes (E6).
type WaitForResult struct {
	Token  Token
	Wait   *Wait
	Staged Staged
	// Locals are the step-execution locals the WaitFor wrote, for its
	// Execute (E32, locals.go).
	Locals map[string]Value
}

// DecisionKind is what an Execute decided (E5).
type DecisionKind string

// Decision kinds (E5).
const (
	DecideMovements        DecisionKind = "MOVEMENTS"
	DecideGracefulComplete DecisionKind = "GRACEFUL_COMPLETE"
	DecideForceComplete    DecisionKind = "FORCE_COMPLETE"
	DecideForceFail        DecisionKind = "FORCE_FAIL"
	DecideDeadEnd          DecisionKind = "DEAD_END"
	// DecideForceCompleteIfChannelsEmpty force-completes the flow with
	// Output when every channel of Channels is empty as the decision
	// commits, else follows Movements (the fallback) (E32, locals.go).
	DecideForceCompleteIfChannelsEmpty DecisionKind = "FORCE_COMPLETE_IF_CHANNELS_EMPTY"
)

// Decision is an Execute's decision (E5). Movements only with
// DecideMovements; Output with the completes; Reason with ForceFail.
type Decision struct {
	Kind      DecisionKind `json:"kind"`
	Movements []Movement   `json:"movements,omitempty"`
	Output    Value        `json:"output,omitzero"`
	Reason    string       `json:"reason,omitempty"`
	// Cancel selects step executions to cancel when the decision commits
	// (E29, cancel.go); any kind of decision may carry it.
	Cancel *CancelSelector `json:"cancel,omitempty"`
	// *IfChannelsEmpty is a FORCE_COMPLETE_IF_CHANNELS_EMPTY's channels
	// (E32), nil for other kinds: one pointer, embedded so its fields
	// encode flat; read them through CloseIfEmpty.
	*IfChannelsEmpty
}

// IfChannelsEmpty are the channels a FORCE_COMPLETE_IF_CHANNELS_EMPTY
// checks and, once decided (records and history), whether they were all
// empty, so that the flow completed rather than following the movements
// (E32).
type IfChannelsEmpty struct {
	Channels      []string `json:"channels,omitempty"`
	ChannelsEmpty bool     `json:"channelsEmpty,omitempty"`
}

// CloseIfEmpty returns the decision's FORCE_COMPLETE_IF_CHANNELS_EMPTY
// part, the zero value when it has none.
func (d Decision) CloseIfEmpty() IfChannelsEmpty {
	if d.IfChannelsEmpty == nil {
		return IfChannelsEmpty{}
	}
	return *d.IfChannelsEmpty
}

// Movement starts a step execution (E5). Options override the step's own
// (E13); SkipWaitFor goes straight to Execute (E4).
type Movement struct {
	StepType    string       `json:"stepType"`
	Input       Value        `json:"input"`
	Options     *StepOptions `json:"options,omitempty"`
	SkipWaitFor bool         `json:"skipWaitFor,omitempty"`
}

// ExecuteResult is an Execute attempt's result (E5, E6).
type ExecuteResult struct {
	Token    Token
	Decision Decision
	Staged   Staged
}

// InvokeRPC is a client's RPC call (E22). It is not a Command: the node gets
// the task from Engine.RPCTask, sends it, and submits RPCResult.
type InvokeRPC struct {
	FlowID string
	RunID  string // optional
	CallID string // chosen by the node, unique among its pending calls
	Name   string
	Input  Value
	// Locks is the call's lock set (E30): the node takes it with LockRPC
	// before it builds the task; empty for an unlocked call.
	Locks []string
}

// RPCResult is an RPC's successful result (E22): its output, staged writes
// and optional movements, committed atomically. A worker error is answered
// to the caller by the node and commits nothing.
type RPCResult struct {
	Token     Token
	Name      string
	StartedAt time.Time // when the node sent the task, for history
	Input     Value     // the call's input, for history (E26)
	Output    Value
	Staged    Staged
	Movements []Movement
	// Locked says the call took locks (LockRPC): its result commits only
	// while it still holds them (E30).
	Locked bool
	// CancelSteps cancels every active step execution of these step
	// types before the movements are created (E29); an RPC has no
	// siblings to cancel.
	CancelSteps []string
}

// TaskFailed reports a failed WaitFor or Execute attempt (E9, E10, E14).
type TaskFailed struct {
	Token   Token
	Failure Failure
	// RetryAfter, when set, replaces the policy's backoff for the next
	// attempt; limits still apply (E10).
	RetryAfter *time.Duration
}

// TimerFired reports that an armed timer is due (E15, E20, E24, E9).
type TimerFired struct {
	FlowID string
	RunID  string
	Timer  Timer
}

// RecoverAttempts is fed once per running flow after a takeover (T2-T4):
// every attempt handed to a worker by an earlier epoch than Epoch fails with
// NOT_COMPLETED and consumes a retry. Scheduled attempts (never handed out,
// or ASYNC ones whose start was not durable) are left alone: they are
// pending tasks and the node dispatches them with the same attempt number.
type RecoverAttempts struct {
	FlowID string
	Epoch  uint64
}

// LockRPC takes an RPC call's lock set, all or nothing (E30): when any
// lock is held, or due to be taken by a waiting step attempt, it is
// ABORTED (ErrLockHeld) naming the lock. The call is checked as RPCTask
// checks it. Epoch is the node's: a takeover releases the locks of calls
// of earlier epochs (RecoverAttempts).
type LockRPC struct {
	Call  InvokeRPC
	Epoch uint64
}

// UnlockRPC releases the locks of an RPC call that will not commit (the
// worker failed it, its caller gave up). A call that holds none decides
// nothing.
type UnlockRPC struct {
	FlowID string
	CallID string
	Reason string
}

func (StartFlow) isCommand()        {}
func (SetDefinition) isCommand()    {}
func (StopFlow) isCommand()         {}
func (PublishToChannel) isCommand() {}
func (SetAttributes) isCommand()    {}
func (SkipTimer) isCommand()        {}
func (TaskStarted) isCommand()      {}
func (WaitForResult) isCommand()    {}
func (ExecuteResult) isCommand()    {}
func (RPCResult) isCommand()        {}
func (TaskFailed) isCommand()       {}
func (TimerFired) isCommand()       {}
func (RecoverAttempts) isCommand()  {}
func (LockRPC) isCommand()          {}
func (UnlockRPC) isCommand()        {}
func (Heartbeat) isCommand()        {}
