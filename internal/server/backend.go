package server

import (
	"context"
	"errors"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// Backend is what the gRPC handlers need from the serving instance of the
// node (serving.Core implements it). Its methods take and return engine
// types; the handlers convert to and from the protobuf contract.
//
// Errors: *engine.Error values carry their API code (E28); ErrNotServing
// means this process cannot serve (UNAVAILABLE); *WorkerError is an RPC
// handler's error; context errors are the caller's deadline or
// cancellation. Everything else is INTERNAL.
type Backend interface {
	// Serving reports whether this instance may answer public calls now:
	// it is active, not draining, and its lease is valid (H2, L15). It is
	// cheap and consulted on every call.
	Serving() bool

	// Identity is the node ID, epoch and process ID of this instance (A1).
	Identity() Identity

	// StartFlow starts a run (E2, E3); the backend chooses the run ID and
	// adds the registered definition. It returns once the start is durable.
	StartFlow(ctx context.Context, c engine.StartFlow) (StartResult, error)

	// Command decides and commits a client command of flowID (StopFlow,
	// PublishToChannel, SetAttributes, SkipTimer) and returns once it is
	// durable (G3).
	Command(ctx context.Context, flowID string, c engine.Command) (CommandResult, error)

	// InvokeRPC runs an RPC on a worker and commits its result (E22). A
	// worker's error is a *WorkerError and commits nothing. It gives up
	// after timeout with context.DeadlineExceeded.
	InvokeRPC(ctx context.Context, call engine.InvokeRPC, timeout time.Duration) (RPCResult, error)

	// Flow returns the committed state of a run: the latest when runID is
	// empty. An unknown flow or run is an *engine.Error with CodeNotFound.
	Flow(ctx context.Context, flowID, runID string) (*engine.FlowState, error)

	// ListFlows lists runs (E27). A page token that does not belong to the
	// query is an *engine.Error with CodeInvalidArgument.
	ListFlows(ctx context.Context, q ListQuery) ([]engine.Summary, string, error)

	// SearchFlows searches runs by a query on their built-in fields and
	// indexed attributes (E36). A malformed query, or a page token of
	// another query, is an *engine.Error with CodeInvalidArgument.
	SearchFlows(ctx context.Context, q SearchQuery) ([]SearchedFlow, string, error)

	// WaitForFlow waits until the run (the latest at the time of the call
	// when runID is empty) is closed and returns its final state, or
	// returns ctx's error (E25). Of the state's values only the outputs
	// need their bytes (value objects elsewhere may keep only their
	// references): the state is for the run's result.
	WaitForFlow(ctx context.Context, flowID, runID string) (*engine.FlowState, error)

	// TaskInfo tells live state which worker runs an attempt and whether a
	// flow type has a connected worker (W5).
	TaskInfo() TaskInfo

	// OpenSession registers a worker (W1) and returns its session.
	OpenSession(ctx context.Context, hello WorkerHello) (Session, error)
}

// ErrNotServing: this process cannot serve (standby, draining, stopped,
// lease not valid). Answered as UNAVAILABLE.
var ErrNotServing = errors.New("this process is not serving; retry on the active process")

// ErrDataLoss: durable data the answer needs is damaged or missing (a value
// object that does not match its name); answered as DATA_LOSS, which no
// client retries.
var ErrDataLoss = errors.New("durable data is damaged or missing")

// Identity names the serving process (A1).
type Identity struct {
	NodeID    string
	Epoch     uint64
	ProcessID string
}

// StartResult answers StartFlow.
type StartResult struct {
	RunID string
	// AlreadyStarted: the request ID matched the latest run's (E3).
	AlreadyStarted bool
}

// CommandResult answers a client command: the run it applied to and that
// run's status afterwards.
type CommandResult struct {
	RunID  string
	Status engine.Status
	// Duplicate: the engine decided nothing because the command repeats
	// one the run accepted (a PublishToChannel request ID, E16). The
	// answer still comes only once that earlier command is durable.
	Duplicate bool
}

// RPCResult answers InvokeRPC.
type RPCResult struct {
	RunID  string
	Output engine.Value
}

// WorkerError is an error an RPC handler returned (E22); the caller gets
// FAILED_PRECONDITION with a dex.WorkerError detail.
type WorkerError struct{ Failure engine.Failure }

func (e *WorkerError) Error() string {
	msg := "the worker's RPC handler failed"
	if e.Failure.Type != "" {
		msg += ": " + e.Failure.Type
	}
	return msg + ": " + e.Failure.Message
}

// ListQuery filters and pages ListFlows (E27); zero fields match all.
type ListQuery struct {
	FlowType  string
	Statuses  []engine.Status
	From, To  time.Time
	PageSize  int
	PageToken string
}

// TaskInfo answers live-state questions about dispatch (W5).
type TaskInfo interface {
	// WorkerOf returns the worker ID that runs the attempt tok names, or "".
	WorkerOf(tok engine.Token) string
	// HasWorker reports whether a connected worker serves flowType.
	HasWorker(flowType string) bool
}

// WorkerHello is a worker's Hello, converted (W1).
type WorkerHello struct {
	WorkerID      string
	FlowTypes     []FlowTypeDecl
	MaxConcurrent int
	SDKVersion    string
}

// FlowTypeDecl is one flow type a worker serves: its definition and its
// default step options (the third level of E13).
type FlowTypeDecl struct {
	Definition *engine.FlowDefinition
	Defaults   *engine.StepOptions
}

// Welcome is what the server answers a Hello with.
type Welcome struct {
	NodeID            string
	Epoch             uint64
	SessionID         string
	HeartbeatInterval time.Duration
	PingInterval      time.Duration
}

// Session is one worker stream's registration with the dispatcher.
type Session interface {
	// Welcome is the session's Welcome.
	Welcome() Welcome
	// Notify is signalled when Take has messages.
	Notify() <-chan struct{}
	// Take returns and removes the messages queued for the worker.
	Take() []Outgoing
	// Untake puts back, ahead of what is queued, messages that Take
	// returned but that never went out (the stream broke first).
	Untake(msgs []Outgoing)
	// Done is closed when the session ended on the server's side (drain
	// over, instance stopped); the stream then ends with UNAVAILABLE.
	Done() <-chan struct{}
	// Result commits a worker's result or failure for tok: a
	// WaitForResult, ExecuteResult, TaskFailed or RPCResult. It returns the
	// ack once the outcome is durable or refused (W2). An error means the
	// outcome is unknown (the process stops serving).
	Result(ctx context.Context, tok engine.Token, cmd engine.Command) (Ack, error)
	// RPCFailed hands an RPC handler's error to the caller (E22).
	RPCFailed(tok engine.Token, f engine.Failure) Ack
	// Heartbeat lists the tasks the worker still runs, and the progress
	// details some of them report (E38). It does not block on the log.
	Heartbeat(running []engine.Token, details []TaskDetails)
	// Close ends the session (the stream ended); the worker's running
	// tasks time out and are retried (W3).
	Close()
}

// TaskDetails are a running task's heartbeat details (E38).
type TaskDetails struct {
	Token   engine.Token
	Details engine.Value
}

// TaskCancel tells the worker that a task it runs was cancelled (E29,
// E38).
type TaskCancel struct {
	Token  engine.Token
	Reason string
}

// Outgoing is one message for the worker: a Task, a Drain or a TaskCancel.
type Outgoing struct {
	Task   *engine.Task
	Drain  *Drain
	Cancel *TaskCancel
	// Until is when a started step task's attempt times out (zero: no
	// timeout, or not a started step task): a task handed back unsent is
	// not sent after it.
	Until time.Time
}

// DrainReason says why a session drains.
type DrainReason int

// Drain reasons.
const (
	DrainShutdown DrainReason = iota + 1
	DrainStepDown
	DrainLeaseLost
)

// Drain tells the worker that no new tasks follow.
type Drain struct {
	Reason  DrainReason
	Timeout time.Duration
	Message string
}

// AckStatus is the verdict on a worker's result (W2).
type AckStatus int

// Ack statuses; they map one to one to dex.TaskAckStatus.
const (
	AckAccepted AckStatus = iota + 1
	AckInvalid
	AckStaleEpoch
	AckCanceled
	AckSuperseded
	AckUnknownTask
)

// Ack answers one result.
type Ack struct {
	Status  AckStatus
	Message string
}
