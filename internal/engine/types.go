package engine

import "time"

// Value is an opaque user payload: the bytes the SDK encoded and the name of
// their type (for example "json:main.Order"). The engine never looks inside
// beyond the declared-type checks.
//
// A large value may be kept out of the log and the local store as a value
// object (the serving core writes its bytes beside the log before its
// command is decided): Ref names the object and Size is its length. Such a
// value is logged and stored without its Data; in memory, between a
// command's arrival and its records' encoding, it carries both, so that
// Decide checks it as any other. Whether a value is an object is decided
// before the command and carried in it, so Apply and replay stay
// deterministic.
type Value struct {
	Type string `json:"type,omitempty"`
	Data []byte `json:"data,omitempty"`
	Ref  string `json:"ref,omitempty"`
	Size int    `json:"size,omitempty"`
}

// IsZero reports whether v is "no value". An empty Data counts as none
// whether it is nil or not, so that a value encodes the same before and
// after a round trip through JSON (omitzero fields use IsZero).
func (v Value) IsZero() bool { return v.Type == "" && len(v.Data) == 0 && v.Ref == "" }

// Len is the value's length in bytes: Size for a value object, else the
// length of Data. Limits (E28) count it.
func (v Value) Len() int {
	if v.Ref != "" {
		return v.Size
	}
	return len(v.Data)
}

// Status is the lifecycle status of a flow run (E8).
type Status string

// Flow statuses (E8).
const (
	StatusRunning    Status = "RUNNING"
	StatusCompleted  Status = "COMPLETED"
	StatusFailed     Status = "FAILED"
	StatusCanceled   Status = "CANCELED"
	StatusTerminated Status = "TERMINATED"
)

// ErrorType classifies why a flow closed other than by completing (E8), or
// why an attempt failed when the engine itself failed it.
type ErrorType string

// Flow error types (E8).
const (
	ErrStepDecisionFailingFlow ErrorType = "STEP_DECISION_FAILING_FLOW"
	ErrClientAPIFailingFlow    ErrorType = "CLIENT_API_FAILING_FLOW"
	ErrWorkerAPIFail           ErrorType = "WORKER_API_FAIL"
	ErrFlowTimeout             ErrorType = "FLOW_TIMEOUT"
	ErrInvalidUserFlowCode     ErrorType = "INVALID_USER_FLOW_CODE"
	ErrInternal                ErrorType = "INTERNAL"
)

// Attempt failure types the engine assigns itself (a worker's own errors
// carry the worker's type name).
const (
	// FailureTimeout: the attempt did not report before its timeout (E9, W3).
	FailureTimeout = "TIMEOUT"
	// FailureNotCompleted: the attempt had been handed to a worker by an
	// earlier epoch and is failed on takeover (T2).
	FailureNotCompleted = "NOT_COMPLETED"
	// FailureHeartbeat: the attempt's worker sent no heartbeat within the
	// method's heartbeat timeout (E38).
	FailureHeartbeat = "HEARTBEAT"
)

// Method is a step method, or an RPC.
type Method string

// Methods.
const (
	MethodWaitFor Method = "waitFor"
	MethodExecute Method = "execute"
	MethodRPC     Method = "rpc"
)

// IDReusePolicy decides whether StartFlow may start a new run for a flow ID
// that already has one (E3). Only the latest run is considered.
type IDReusePolicy string

// ID reuse policies (E3).
const (
	// ReuseDefault rejects while the latest run is RUNNING, else starts.
	ReuseDefault IDReusePolicy = ""
	// ReuseDisallow rejects whenever the flow ID has a run.
	ReuseDisallow IDReusePolicy = "DISALLOW"
	// ReuseAllowIfNotRunning starts when the latest run is closed.
	ReuseAllowIfNotRunning IDReusePolicy = "ALLOW_IF_NOT_RUNNING"
	// ReuseAllowIfPreviousFailed starts when the latest run closed FAILED,
	// CANCELED or TERMINATED; it rejects RUNNING and COMPLETED.
	ReuseAllowIfPreviousFailed IDReusePolicy = "ALLOW_IF_PREVIOUS_FAILED"
	// ReuseTerminateIfRunning terminates a running latest run, then starts.
	ReuseTerminateIfRunning IDReusePolicy = "TERMINATE_IF_RUNNING"
)

// TimeoutPolicy is what a flow timeout does (E24).
type TimeoutPolicy string

// Flow timeout policies (E24).
const (
	TimeoutFail   TimeoutPolicy = "FAIL" // FAILED / FLOW_TIMEOUT (the default)
	TimeoutCancel TimeoutPolicy = "CANCEL"
)

// StopKind is how StopFlow closes a flow (E23).
type StopKind string

// Stop kinds (E23).
const (
	StopCancel    StopKind = "CANCEL" // the default
	StopTerminate StopKind = "TERMINATE"
	StopFail      StopKind = "FAIL"
)

// FailurePolicy is what happens when WaitFor's retries are exhausted (E11).
type FailurePolicy string

// WaitFor failure policies (E11).
const (
	FailFlow FailurePolicy = "FAIL_FLOW" // the default
	Proceed  FailurePolicy = "PROCEED"
)

// Durability says when an attempt's start is logged (W4).
type Durability string

// Durabilities (W4).
const (
	// SYNC: the start is durable before the task is sent.
	SYNC Durability = "SYNC"
	// ASYNC: the task is sent at once; its start is logged with the next
	// batch (T3 covers a crash in between).
	ASYNC Durability = "ASYNC"
)

// Failure describes a failed attempt (E14) or a worker error.
type Failure struct {
	Type    string `json:"type,omitempty"`
	Message string `json:"message,omitempty"`
	Stack   string `json:"stack,omitempty"`
	// NonRetryable says another attempt cannot succeed (a value that does
	// not decode, an invalid result, an application error the worker
	// marked so): the step's failure policy applies at once, whatever the
	// retry policy allows.
	NonRetryable bool `json:"nonRetryable,omitempty"`
}

// FlowDefinition is what a worker registers for a flow type: its steps,
// RPCs, attributes and channels. StartFlow (and SetDefinition) store it in
// the run's state; the engine then checks movements, RPC names, attribute
// and channel names against it and takes each step's own options from it
// (E13). A run started without a definition (no worker has registered the
// type yet, W5) is lenient: any step type, RPC, attribute and channel name
// is accepted and every step is assumed to have a WaitFor (a worker answers
// "no wait" for a step that has none).
type FlowDefinition struct {
	Type string `json:"type"`
	// Start is the declared start step, empty when RPCs drive the flow.
	// A StartFlow without a start step starts here.
	Start      string             `json:"start,omitempty"`
	Steps      map[string]StepDef `json:"steps,omitempty"`
	RPCs       []string           `json:"rpcs,omitempty"`
	Attributes []string           `json:"attributes,omitempty"`
	Channels   []string           `json:"channels,omitempty"`
	// AttributeTypes and ChannelTypes are the declared value types of some
	// attributes and channels, by name (valueshape.go).
	AttributeTypes map[string]*ValueType `json:"attributeTypes,omitempty"`
	ChannelTypes   map[string]*ValueType `json:"channelTypes,omitempty"`
	// Indexed are the attributes indexed for search, by attribute name
	// (E36, search.go).
	Indexed map[string]IndexedAttribute `json:"indexed,omitempty"`
}

// StepDef declares one step type of a flow.
type StepDef struct {
	HasWaitFor bool         `json:"hasWaitFor,omitempty"`
	Options    *StepOptions `json:"options,omitempty"`
	// Input is the declared type of the step's input (valueshape.go).
	Input *ValueType `json:"input,omitempty"`
}

// StepOptions are the per-step options. Every field may be unset (nil or
// empty); options resolve field by field: per-movement override, the step's
// own options, the flow's config, then server defaults (E13).
type StepOptions struct {
	WaitFor        *MethodOptions `json:"waitFor,omitempty"`
	Execute        *MethodOptions `json:"execute,omitempty"`
	WaitForFailure FailurePolicy  `json:"waitForFailure,omitempty"` // E11
	RecoveryStep   string         `json:"recoveryStep,omitempty"`   // E12
}

// MethodOptions are the options of one method (WaitFor or Execute).
type MethodOptions struct {
	Timeout    *time.Duration `json:"timeout,omitempty"` // per attempt
	Retry      *RetryOptions  `json:"retry,omitempty"`
	Durability Durability     `json:"durability,omitempty"`
	// Locks is the method's lock set (E30, locks.go): the attempt starts
	// only when it holds every lock; nil inherits, like every field.
	Locks []string `json:"locks,omitempty"`
	// HeartbeatTimeout fails a running attempt whose worker sent no
	// heartbeat for that long (E38); 0 or unset: none.
	HeartbeatTimeout *time.Duration `json:"heartbeatTimeout,omitempty"`
}

// RetryOptions is a partially set retry policy (E9).
type RetryOptions struct {
	InitialInterval *time.Duration `json:"initialInterval,omitempty"`
	Coefficient     *float64       `json:"coefficient,omitempty"`
	MaxInterval     *time.Duration `json:"maxInterval,omitempty"`
	MaxAttempts     *int           `json:"maxAttempts,omitempty"` // 0 = unlimited; counts the first
	MaxTotal        *time.Duration `json:"maxTotal,omitempty"`    // 0 = none
}

// RetryPolicy is a fully resolved retry policy (E9).
type RetryPolicy struct {
	InitialInterval time.Duration `json:"initialInterval"`
	Coefficient     float64       `json:"coefficient"`
	MaxInterval     time.Duration `json:"maxInterval"`
	MaxAttempts     int           `json:"maxAttempts,omitempty"`
	MaxTotal        time.Duration `json:"maxTotal,omitempty"`
}

// MethodPolicy is the resolved policy of one method of one step execution.
type MethodPolicy struct {
	Timeout    time.Duration `json:"timeout"`
	Retry      RetryPolicy   `json:"retry"`
	Durability Durability    `json:"durability"`
}

// ResolvedOptions are a step execution's options after precedence (E13);
// they are fixed when the step execution is created and carried in its
// StepCreated record.
type ResolvedOptions struct {
	WaitFor        MethodPolicy  `json:"waitFor"`
	Execute        MethodPolicy  `json:"execute"`
	WaitForFailure FailurePolicy `json:"waitForFailure"`
	RecoveryStep   string        `json:"recoveryStep,omitempty"`
	// *Rare holds the options few steps set (E30 locks, E38 heartbeats),
	// nil when a step sets none of them: one pointer, so that a step
	// without them (copied with each state clone) keeps StepExec within
	// its 512-byte allocation class. Embedded, so its fields encode flat
	// under their own keys as before it existed. Read them through
	// MethodLocks, HasLocks and HeartbeatTimeouts, never as promoted
	// fields: those panic when Rare is nil.
	*Rare
}

// Rare are the resolved options few steps set (see ResolvedOptions.Rare).
type Rare struct {
	// Locks are the methods' resolved lock sets (E30), nil when neither
	// has one.
	Locks *ResolvedLocks `json:"locks,omitempty"`
	// Heartbeat holds the methods' heartbeat timeouts (E38), nil when
	// neither has one.
	Heartbeat *HeartbeatPolicy `json:"heartbeat,omitempty"`
}

// HasLocks reports whether either method holds locks (E30).
func (r ResolvedOptions) HasLocks() bool { return r.Rare != nil && r.Locks != nil }

// HeartbeatTimeouts returns the methods' heartbeat timeouts, zero when none (E38).
func (r ResolvedOptions) HeartbeatTimeouts() HeartbeatPolicy {
	if r.Rare == nil || r.Heartbeat == nil {
		return HeartbeatPolicy{}
	}
	return *r.Heartbeat
}

// ResolvedLocks are the lock sets of a step execution's methods (E30).
type ResolvedLocks struct {
	WaitFor []string `json:"waitFor,omitempty"`
	Execute []string `json:"execute,omitempty"`
}

// MethodLocks returns method m's lock set.
func (r ResolvedOptions) MethodLocks(m Method) []string {
	switch {
	case !r.HasLocks():
		return nil
	case m == MethodWaitFor:
		return r.Locks.WaitFor
	default:
		return r.Locks.Execute
	}
}

// HeartbeatPolicy are the resolved heartbeat timeouts of a step's methods
// (0: none).
type HeartbeatPolicy struct {
	WaitFor time.Duration `json:"waitFor,omitempty"`
	Execute time.Duration `json:"execute,omitempty"`
}

// Staged are a handler's attribute writes and channel publishes; they commit
// atomically with its result or not at all (E6).
type Staged struct {
	Attributes []AttributeWrite `json:"attributes,omitempty"`
	Publishes  []Publish        `json:"publishes,omitempty"`
	// *StagedEvents holds the user events the handler recorded (E32),
	// nil when it recorded none: one pointer, so that Staged (in every
	// history event) grows by 8 bytes, not 24. Embedded, so "events"
	// encodes flat; read it through UserEvents, never as a promoted field
	// (that panics when the pointer is nil).
	*StagedEvents
}

// StagedEvents are a handler's user events (E32, RecordEvent): each
// becomes a USER_EVENT in history after the completion's event.
type StagedEvents struct {
	Events []UserEvent `json:"events,omitempty"`
}

// UserEvents returns the staged user events (E32).
func (s Staged) UserEvents() []UserEvent {
	if s.StagedEvents == nil {
		return nil
	}
	return s.Events
}

// IsZero reports whether s holds no write (empty and nil lists alike, see
// Value.IsZero).
func (s Staged) IsZero() bool {
	return len(s.Attributes) == 0 && len(s.Publishes) == 0 && len(s.UserEvents()) == 0
}

// UserEvent is one event a handler recorded into its run's history (E32).
type UserEvent struct {
	Name  string `json:"name"`
	Value Value  `json:"value,omitzero"`
}

// AttributeWrite sets one attribute (E21).
type AttributeWrite struct {
	Name  string `json:"name"`
	Value Value  `json:"value"`
}

// Publish is one message for one channel (E16).
type Publish struct {
	Channel string `json:"channel"`
	Value   Value  `json:"value"`
}

// Message is a queued or consumed channel message. Seq numbers every
// message of a run in publish order.
type Message struct {
	Seq   uint64 `json:"seq"`
	Value Value  `json:"value"`
}

// Output is one graceful or force-complete output of a flow (E7).
type Output struct {
	StepType   string `json:"stepType"`
	StepExecID string `json:"stepExecId"`
	Value      Value  `json:"value"`
}

// CloseInfo says how a run closed (E7, E8).
type CloseInfo struct {
	Status    Status    `json:"status"`
	ErrorType ErrorType `json:"errorType,omitempty"`
	Message   string    `json:"message,omitempty"`
}
