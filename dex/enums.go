package dex

import "github.com/dexzd/dexzd/api/dexpb"

// The SDK's enumerations have the numbers of the API's enums (enums_test.go
// checks), so converting between them is a plain conversion. Each String
// method returns the API's name, for example "FLOW_STATUS_COMPLETED".

// FlowStatus is a flow execution's status.
type FlowStatus int32

// The flow statuses. Every status but StatusRunning is terminal.
const (
	StatusRunning    FlowStatus = 1
	StatusCompleted  FlowStatus = 2
	StatusFailed     FlowStatus = 3
	StatusCanceled   FlowStatus = 4
	StatusTerminated FlowStatus = 5
	// StatusContinuedAsNew: the run continued as a new run of the same
	// flow ID (E37); FlowState.ContinuedRunID names it.
	StatusContinuedAsNew FlowStatus = 6
)

func (s FlowStatus) String() string { return dexpb.FlowStatus(s).String() }

// FlowErrorType classifies why a flow failed or was stopped.
type FlowErrorType int32

// The flow error types.
const (
	// ErrorStepDecision: a step's Execute returned ForceFail.
	ErrorStepDecision FlowErrorType = 1
	// ErrorStopped: a client failed the flow with StopFlow(StopFail), or
	// cancelled or terminated it.
	ErrorStopped FlowErrorType = 2
	// ErrorWorker: a handler exhausted its retries.
	ErrorWorker FlowErrorType = 3
	// ErrorFlowTimeout: the flow's timeout expired (WithFlowTimeout).
	ErrorFlowTimeout FlowErrorType = 4
	// ErrorInvalidFlowCode: a handler's result broke the flow's declaration.
	ErrorInvalidFlowCode FlowErrorType = 5
	// ErrorInternal: the server failed the flow.
	ErrorInternal FlowErrorType = 6
)

func (t FlowErrorType) String() string { return dexpb.FlowErrorType(t).String() }

// TaskKind says which handler a task runs.
type TaskKind int32

// The task kinds.
const (
	KindWaitFor TaskKind = 1
	KindExecute TaskKind = 2
	KindRPC     TaskKind = 3
)

func (k TaskKind) String() string { return dexpb.TaskKind(k).String() }

// AttemptFailureKind says why an attempt failed.
type AttemptFailureKind int32

// The attempt failure kinds.
const (
	// FailureWorkerError: the handler returned an error or panicked.
	FailureWorkerError AttemptFailureKind = 1
	// FailureTimeout: the attempt ran past its AttemptTimeout.
	FailureTimeout AttemptFailureKind = 2
	// FailureNotCompleted: the attempt's worker went away (or the server
	// restarted) before it answered.
	FailureNotCompleted AttemptFailureKind = 3
	// FailureInvalidFlowCode: the handler's result broke the flow's
	// declaration.
	FailureInvalidFlowCode AttemptFailureKind = 4
	// FailureHeartbeatTimeout: the attempt's worker sent no heartbeat
	// within the handler's HeartbeatTimeout (crashed, cut off).
	FailureHeartbeatTimeout AttemptFailureKind = 5
)

func (k AttemptFailureKind) String() string { return dexpb.AttemptFailureKind(k).String() }

// IDReusePolicy decides whether a flow ID with earlier runs may start again.
type IDReusePolicy int32

// The ID reuse policies; the zero value refuses while a run is active.
const (
	ReuseDisallow              IDReusePolicy = 1
	ReuseAllowIfNotRunning     IDReusePolicy = 2
	ReuseAllowIfPreviousFailed IDReusePolicy = 3
	ReuseTerminateIfRunning    IDReusePolicy = 4
)

func (p IDReusePolicy) String() string { return dexpb.IdReusePolicy(p).String() }

// FlowTimeoutPolicy says how a flow ends when its timeout expires.
type FlowTimeoutPolicy int32

// The flow timeout policies.
const (
	TimeoutFail   FlowTimeoutPolicy = 1
	TimeoutCancel FlowTimeoutPolicy = 2
	// TimeoutHandle runs a handler step on the timeout (E34); set it with
	// WithTimeoutHandler, which names the step.
	TimeoutHandle FlowTimeoutPolicy = 3
)

func (p FlowTimeoutPolicy) String() string { return dexpb.FlowTimeoutPolicy(p).String() }

// StopType says how StopFlow ends a flow.
type StopType int32

// The stop types.
const (
	// StopDefault leaves the choice to the server, which cancels.
	StopDefault   StopType = 0
	StopCancel    StopType = 1
	StopTerminate StopType = 2
	StopFail      StopType = 3
)

func (t StopType) String() string { return dexpb.StopType(t).String() }

// Durability says when an attempt's start is made durable.
//
// The server default is ASYNC (the task is sent at once and its start is
// logged with its result; after a crash the attempt may run again with the
// same number, consuming no retry), except for a method with a
// recovery path, which is SYNC: an Execute with a recovery step and a
// WaitFor whose failure policy is PROCEED. Set DurabilitySync for a
// handler whose every run must count against its retry policy.
type Durability int32

// The durabilities; the zero value inherits.
const (
	DurabilitySync  Durability = 1
	DurabilityAsync Durability = 2
)

func (d Durability) String() string { return dexpb.AttemptDurability(d).String() }

// WaitForFailurePolicy says what happens when a WaitFor runs out of retries.
type WaitForFailurePolicy int32

// The WaitFor failure policies; the zero value inherits.
const (
	WaitForFailFlow WaitForFailurePolicy = 1
	WaitForProceed  WaitForFailurePolicy = 2
)

func (p WaitForFailurePolicy) String() string { return dexpb.WaitForFailurePolicy(p).String() }

// ExecuteFailurePolicy says what happens when an Execute runs out of retries.
type ExecuteFailurePolicy int32

// The Execute failure policies; the zero value inherits.
const (
	ExecuteFailFlow          ExecuteFailurePolicy = 1
	ExecuteProceedToRecovery ExecuteFailurePolicy = 2
)

func (p ExecuteFailurePolicy) String() string { return dexpb.ExecuteFailurePolicy(p).String() }
