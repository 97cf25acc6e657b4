package engine

import "time"

// Record is one durable state change of one run. Records carry every
// decision (IDs, absolute times, attempt numbers, backoffs), so Apply needs
// nothing but the state and the record. The records one Decide call returns
// must be logged in one batch, in order.
type Record struct {
	FlowID string
	RunID  string
	At     time.Time // the `now` of the command that produced it
	Body   RecordBody
}

// RecordBody is the typed content of a record.
type RecordBody interface{ recordType() string }

// FlowStarted starts a new run; applied to an existing state it replaces it
// (E2, E3). Attributes are the initial attributes (E21). StartStep (the
// start step as given, for history; its StepCreated record follows),
// IDReusePolicy and TerminatedRunID (the running run the start
// terminated) are kept for the FLOW_STARTED event (E26).
// PublishRequestIDs are the publish request IDs the replaced run
// remembered: the new run starts with them, so that a publish retried after
// the flow ID moved to a new run lands at most once (E16). They are in the
// record, not read from the replaced run, so that the run's state follows
// from its own records (a log written before the field existed replays as
// it did).
type FlowStarted struct {
	FlowType          string           `json:"flowType"`
	RequestID         string           `json:"requestId,omitempty"`
	PreviousRunID     string           `json:"previousRunId,omitempty"`
	TerminatedRunID   string           `json:"terminatedRunId,omitempty"`
	IDReusePolicy     IDReusePolicy    `json:"idReusePolicy,omitempty"`
	StartStep         *Movement        `json:"startStep,omitempty"`
	Definition        *FlowDefinition  `json:"definition,omitempty"`
	Config            *StepOptions     `json:"config,omitempty"`
	TimeoutAt         time.Time        `json:"timeoutAt,omitzero"`
	TimeoutPolicy     TimeoutPolicy    `json:"timeoutPolicy,omitempty"`
	Attributes        []AttributeWrite `json:"attributes,omitempty"`
	PublishRequestIDs []string         `json:"publishRequestIds,omitempty"`
	// TraceContext is the start's trace context (W3C traceparent and
	// tracestate) when the start was traced: every task of the run
	// carries it, so a worker's spans join the start's trace, also after
	// a restart or a takeover. Absent (zero bytes) for an untraced start.
	TraceContext map[string]string `json:"traceContext,omitempty"`
	// Flow-level options (E34): the start step's first attempt is not
	// before At + StartDelay; Retry is the run's place under its flow
	// retry policy; TimeoutHandler is the HANDLER timeout's step.
	StartDelay     time.Duration   `json:"startDelay,omitempty"`
	Retry          *FlowRetry      `json:"retry,omitempty"`
	TimeoutHandler *TimeoutHandler `json:"timeoutHandler,omitempty"`
	// Parent names the run and condition whose Wait started this run as
	// a subflow (E31); nil for a flow a client started.
	Parent *ParentRef `json:"parent,omitempty"`
	// Reset is the state at the point of the run a reset started this
	// run from (E37); nil for any other start.
	Reset *ResetStart `json:"reset,omitempty"`
}

// DefinitionSet replaces the run's definition. Config, when set, becomes
// the flow's config (the run had none). Steps carries the options each
// existing step execution resolves to under the definition, decided when
// the record is written (only on a run that had no definition, and only
// the steps whose options change).
type DefinitionSet struct {
	Definition *FlowDefinition `json:"definition"`
	Config     *StepOptions    `json:"config,omitempty"`
	Steps      []StepRedefined `json:"steps,omitempty"`
}

// StepRedefined is a step execution's options under a definition set
// after its creation (E13).
type StepRedefined struct {
	StepExecID string          `json:"stepExecId"`
	Options    ResolvedOptions `json:"options"`
	HasWaitFor bool            `json:"hasWaitFor,omitempty"`
}

// StepCreated creates step execution <StepType>-<N> (E1).
type StepCreated struct {
	StepExecID string          `json:"stepExecId"`
	StepType   string          `json:"stepType"`
	N          int             `json:"n"`
	Input      Value           `json:"input"`
	ParentID   string          `json:"parentId,omitempty"`
	Options    ResolvedOptions `json:"options"`
	HasWaitFor bool            `json:"hasWaitFor,omitempty"`
	// Override is the per-movement (or start) options the step was
	// created with, recorded only while the run has no definition: a
	// later definition re-resolves the step's options with it.
	Override *StepOptions `json:"override,omitempty"`
}

// AttemptScheduled schedules attempt Attempt of Method, to be handed out not
// before NotBefore (E9). Execute attempt 1 ends the step's wait.
type AttemptScheduled struct {
	StepExecID    string    `json:"stepExecId"`
	Method        Method    `json:"method"`
	Attempt       int       `json:"attempt"`
	FirstAt       time.Time `json:"firstAt"`
	NotBefore     time.Time `json:"notBefore"`
	WaitForFailed *Failure  `json:"waitForFailed,omitempty"` // E11 PROCEED
}

// AttemptStarted: the attempt is handed to a worker under a token of Epoch
// (W2, W4); it times out at TimeoutAt.
type AttemptStarted struct {
	StepExecID string    `json:"stepExecId"`
	Method     Method    `json:"method"`
	Attempt    int       `json:"attempt"`
	Epoch      uint64    `json:"epoch"`
	Async      bool      `json:"async,omitempty"`
	TimeoutAt  time.Time `json:"timeoutAt"`
}

// AttemptFailed: the running attempt failed, timed out or was not completed
// (E9, E14, T2). The next record schedules a retry or applies the method's
// exhaustion policy. NextAttemptAt is the retry's NotBefore, as the
// attempt_scheduled record that follows carries it; zero when the retries
// ran out (E26).
type AttemptFailed struct {
	StepExecID    string        `json:"stepExecId"`
	Method        Method        `json:"method"`
	Attempt       int           `json:"attempt"`
	Duration      time.Duration `json:"duration"`
	Failure       Failure       `json:"failure"`
	NextAttemptAt time.Time     `json:"nextAttemptAt,omitzero"`
}

// WaitForCompleted stores a WaitFor's Wait (nil: none) and commits its
// staged writes (E4, E6).
type WaitForCompleted struct {
	StepExecID string        `json:"stepExecId"`
	Attempt    int           `json:"attempt"`
	Duration   time.Duration `json:"duration"`
	Wait       *StoredWait   `json:"wait,omitempty"`
	Staged     Staged        `json:"staged,omitzero"`
	// Locals are the WaitFor's step-execution locals (E32).
	Locals map[string]Value `json:"locals,omitempty"`
}

// ConditionSatisfied: channel condition Index of a step's wait takes the
// first Count messages of its channel's queue (E16, E17).
type ConditionSatisfied struct {
	StepExecID string `json:"stepExecId"`
	Index      int    `json:"index"`
	Count      int    `json:"count"`
}

// WaitTimerFired: timer condition Index (a condition index, not a timer
// index) fired, or was skipped (E15, E19).
type WaitTimerFired struct {
	StepExecID string `json:"stepExecId"`
	Index      int    `json:"index"`
	Skipped    bool   `json:"skipped,omitempty"`
}

// ExecuteCompleted ends a step execution with its decision and commits its
// staged writes (E5, E6). The movements (kept for history, E26) follow as
// StepCreated records with the IDs listed in Scheduled.
type ExecuteCompleted struct {
	StepExecID string        `json:"stepExecId"`
	Attempt    int           `json:"attempt"`
	Duration   time.Duration `json:"duration"`
	Kind       DecisionKind  `json:"kind"`
	Movements  []Movement    `json:"movements,omitempty"`
	Scheduled  []string      `json:"scheduled,omitempty"`
	Output     Value         `json:"output,omitzero"`
	Reason     string        `json:"reason,omitempty"`
	Staged     Staged        `json:"staged,omitzero"`
	// Cancel is the decision's cancellation selector, kept for history
	// (E29); the steps_canceled record that follows applies it.
	Cancel *CancelSelector `json:"cancel,omitempty"`
	// *IfChannelsEmpty: a FORCE_COMPLETE_IF_CHANNELS_EMPTY decision's
	// channels and what Decide found (E32): all empty, the flow completes
	// with Output; else Movements were followed (and Scheduled lists
	// them). Nil for other kinds (see Decision.IfChannelsEmpty).
	*IfChannelsEmpty
}

// ChannelPublished appends client messages to channel queues (E16). A
// non-empty RequestID joins the run's accepted publish request IDs.
type ChannelPublished struct {
	Messages  []Publish `json:"messages"`
	RequestID string    `json:"requestId,omitempty"`
}

// AttributesSet writes client attributes (E21).
type AttributesSet struct {
	Attributes []AttributeWrite `json:"attributes"`
}

// RPCCompleted commits an RPC's output and staged writes (E22). Its input
// and movements are kept for history (E26); the movements follow as
// StepCreated records with the IDs listed in Scheduled.
type RPCCompleted struct {
	CallID    string        `json:"callId"`
	Name      string        `json:"name"`
	Duration  time.Duration `json:"duration"`
	Input     Value         `json:"input,omitzero"`
	Output    Value         `json:"output"`
	Movements []Movement    `json:"movements,omitempty"`
	Scheduled []string      `json:"scheduled,omitempty"`
	Staged    Staged        `json:"staged,omitzero"`
	// CancelSteps are the step types the RPC cancels, kept for history
	// (E29); the steps_canceled record that follows applies them.
	CancelSteps []string `json:"cancelSteps,omitempty"`
}

// StepEnded removes a step execution without a decision: its Execute ran
// out of retries and a recovery step follows (E12).
type StepEnded struct {
	StepExecID string `json:"stepExecId"`
	Reason     string `json:"reason"`
}

// FlowClosed closes the run; active step executions are cancelled (E5, E7,
// E23, E24).
type FlowClosed struct {
	CloseInfo
}

// RPCLocked: RPC call CallID, handed out under a token of Epoch, holds
// Locks until its result commits or RPCUnlocked releases them (E30).
type RPCLocked struct {
	CallID string   `json:"callId"`
	Name   string   `json:"name"`
	Locks  []string `json:"locks"`
	Epoch  uint64   `json:"epoch"`
}

// RPCUnlocked releases the locks of an RPC call that will not commit: the
// worker failed it, its caller gave up (timeout), or a takeover ended its
// epoch (E30). A later result of the call is refused.
type RPCUnlocked struct {
	CallID string `json:"callId"`
	Reason string `json:"reason,omitempty"`
}

func (FlowStarted) recordType() string        { return "flow_started" }
func (DefinitionSet) recordType() string      { return "definition_set" }
func (StepCreated) recordType() string        { return "step_created" }
func (AttemptScheduled) recordType() string   { return "attempt_scheduled" }
func (AttemptStarted) recordType() string     { return "attempt_started" }
func (AttemptFailed) recordType() string      { return "attempt_failed" }
func (WaitForCompleted) recordType() string   { return "wait_for_completed" }
func (ConditionSatisfied) recordType() string { return "condition_satisfied" }
func (WaitTimerFired) recordType() string     { return "wait_timer_fired" }
func (ExecuteCompleted) recordType() string   { return "execute_completed" }
func (ChannelPublished) recordType() string   { return "channel_published" }
func (AttributesSet) recordType() string      { return "attributes_set" }
func (RPCCompleted) recordType() string       { return "rpc_completed" }
func (StepEnded) recordType() string          { return "step_ended" }
func (FlowClosed) recordType() string         { return "flow_closed" }
func (RPCLocked) recordType() string          { return "rpc_locked" }
func (RPCUnlocked) recordType() string        { return "rpc_unlocked" }
func (StepsCanceled) recordType() string      { return "steps_canceled" }
func (AttemptHeartbeat) recordType() string   { return "attempt_heartbeat" }

// decodeBody decodes the body of a record of type T with unmarshal (the
// codec of the record's format, codec.go).
func decodeBody[T RecordBody](b []byte, unmarshal func([]byte, any) error) (RecordBody, error) {
	var v T
	err := unmarshal(b, &v)
	return v, err
}

// recordTypes maps each type name to its decoder; it is the one list of
// record types the codec knows.
var recordTypes = map[string]func([]byte, func([]byte, any) error) (RecordBody, error){
	FlowStarted{}.recordType():           decodeBody[FlowStarted],
	DefinitionSet{}.recordType():         decodeBody[DefinitionSet],
	StepCreated{}.recordType():           decodeBody[StepCreated],
	AttemptScheduled{}.recordType():      decodeBody[AttemptScheduled],
	AttemptStarted{}.recordType():        decodeBody[AttemptStarted],
	AttemptFailed{}.recordType():         decodeBody[AttemptFailed],
	WaitForCompleted{}.recordType():      decodeBody[WaitForCompleted],
	ConditionSatisfied{}.recordType():    decodeBody[ConditionSatisfied],
	WaitTimerFired{}.recordType():        decodeBody[WaitTimerFired],
	ExecuteCompleted{}.recordType():      decodeBody[ExecuteCompleted],
	ChannelPublished{}.recordType():      decodeBody[ChannelPublished],
	AttributesSet{}.recordType():         decodeBody[AttributesSet],
	RPCCompleted{}.recordType():          decodeBody[RPCCompleted],
	StepEnded{}.recordType():             decodeBody[StepEnded],
	FlowClosed{}.recordType():            decodeBody[FlowClosed],
	FlowRetried{}.recordType():           decodeBody[FlowRetried],
	FlowReset{}.recordType():             decodeBody[FlowReset],
	TimeoutHandlerStarted{}.recordType(): decodeBody[TimeoutHandlerStarted],
	SubFlowUpdated{}.recordType():        decodeBody[SubFlowUpdated],
	RPCLocked{}.recordType():             decodeBody[RPCLocked],
	RPCUnlocked{}.recordType():           decodeBody[RPCUnlocked],
	StepsCanceled{}.recordType():         decodeBody[StepsCanceled],
	AttemptHeartbeat{}.recordType():      decodeBody[AttemptHeartbeat],
}

// Type returns the record's type name, as encoded.
func (r Record) Type() string {
	if r.Body == nil {
		return ""
	}
	return r.Body.recordType()
}
