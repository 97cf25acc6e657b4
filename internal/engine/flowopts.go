package engine

import (
	"fmt"
	"slices"
	"time"
)

// Flow-level options (E34): a start delay, a flow retry policy and the
// HANDLER flow-timeout policy. See "Flow-level options" in the package
// documentation for the rules.

// TimeoutRunHandler: on the flow timeout the run's TimeoutHandler step runs
// and decides how the flow closes (E34).
const TimeoutRunHandler TimeoutPolicy = "HANDLER"

// DefaultTimeoutHandlerDeadline is the timeout handler's deadline when the
// start names none (E34).
const DefaultTimeoutHandlerDeadline = time.Minute

// MaxStartDelay is the longest start delay accepted (E34).
const MaxStartDelay = MaxRetryInterval

// TimeoutHandler is the step a HANDLER flow timeout runs (E34): StepType
// runs (straight to Execute, with no input) and must close the flow within
// Deadline of the timeout.
type TimeoutHandler struct {
	StepType string        `json:"stepType"`
	Deadline time.Duration `json:"deadline"`
}

// FlowRetry is a run's place under its flow retry policy (E34). Attempt
// counts the runs, 1 for the run the client started; FirstRunID and
// FirstStartedAt are that run's, RetriedRunID the failed run this one
// retries (empty for the first). Timeout is the start's flow timeout, which
// each retry run gets again.
type FlowRetry struct {
	Policy         RetryPolicy   `json:"policy"`
	Attempt        int           `json:"attempt"`
	FirstRunID     string        `json:"firstRunId"`
	FirstStartedAt time.Time     `json:"firstStartedAt"`
	RetriedRunID   string        `json:"retriedRunId,omitempty"`
	Timeout        time.Duration `json:"timeout,omitempty"`
}

// RunRetry is what a run under a flow retry policy keeps to start its
// retry: its place under the policy and the start's step and attributes
// (the rest of the start is in the run's own fields). The run never
// changes it, so clones share it.
type RunRetry struct {
	FlowRetry
	StartStep  *Movement        `json:"startStep,omitempty"`
	Attributes []AttributeWrite `json:"attributes,omitempty"`
}

// RunOptions are a run's flow-level options and their state (E34).
// Retry: the flow retry policy's state, nil without one (never changed,
// so clones share it). RetryRunID: the run that retries this failed one.
// TimeoutHandler: the HANDLER timeout's step; HandlerDeadlineAt: when the
// running handler's deadline fires.
type RunOptions struct {
	Retry             *RunRetry       `json:"retry,omitempty"`
	RetryRunID        string          `json:"retryRunId,omitempty"`
	ResetRunID        string          `json:"resetRunId,omitempty"`     // E37: the run a reset of this run started
	ResetRequestID    string          `json:"resetRequestId,omitempty"` // E37: that reset's request ID
	TimeoutHandler    *TimeoutHandler `json:"timeoutHandler,omitempty"`
	HandlerDeadlineAt time.Time       `json:"handlerDeadlineAt,omitzero"`
	// Continued is the run's place in its continue-as-new chain (E37).
	Continued *Continuation `json:"continued,omitempty"`
	// carry is the live state a run that continues as new hands to its
	// successor (E37, continue.go): set by flow_continued_as_new, read by
	// the flow_started that follows in the same batch. Never encoded.
	// Here rather than in FlowState, so runs that never continue pay
	// nothing for it.
	carry *FlowState
}

// RetryRunID is the run that retries this failed run under the flow retry
// policy, "" when there is none (E34).
func (st *FlowState) RetryRunID() string {
	if st == nil || st.Opts == nil {
		return ""
	}
	return st.Opts.RetryRunID
}

func (st *FlowState) timeoutHandler() *TimeoutHandler {
	if st.Opts == nil {
		return nil
	}
	return st.Opts.TimeoutHandler
}

func (st *FlowState) handlerDeadline() time.Time {
	if st.Opts == nil {
		return time.Time{}
	}
	return st.Opts.HandlerDeadlineAt
}

// FlowRetried is logged on a failed run, after its FlowClosed, when the
// flow retry policy starts RetryRunID, whose first step runs not before
// NotBefore (E34). The FlowStarted of RetryRunID follows.
type FlowRetried struct {
	RetryRunID string    `json:"retryRunId"`
	Attempt    int       `json:"attempt"`
	NotBefore  time.Time `json:"notBefore"`
}

// TimeoutHandlerStarted is logged when a HANDLER flow timeout fires (E34):
// the active step executions (Canceled) end, and the StepCreated of the
// handler's StepExecID follows; the flow fails unless it closes by
// DeadlineAt.
type TimeoutHandlerStarted struct {
	StepExecID string    `json:"stepExecId"`
	DeadlineAt time.Time `json:"deadlineAt"`
	Canceled   []string  `json:"canceled,omitempty"`
}

func (FlowRetried) recordType() string           { return "flow_retried" }
func (TimeoutHandlerStarted) recordType() string { return "timeout_handler_started" }

// TimerTimeoutHandler is the deadline of a running timeout handler (E34).
const TimerTimeoutHandler TimerKind = "TIMEOUT_HANDLER"

// retryRunID names the run that retries attempt n-1 of the flow whose first
// run is first: the node chose first (unique), so the name is unique too,
// and it is decided from the state alone (the record carries it anyway).
func retryRunID(first string, n int) string { return fmt.Sprintf("%s.retry-%d", first, n) }

// validateFlowOptions checks a start's E34 options.
func (d *decider) validateFlowOptions(c StartFlow, stepOK func(string) bool) error {
	switch {
	case c.StartDelay < 0:
		return invalidArg("startDelay", "must not be negative, got %v", c.StartDelay)
	case c.StartDelay > MaxStartDelay:
		return invalidArg("startDelay", "must be at most %v (365 days), got %v", MaxStartDelay, c.StartDelay)
	case c.StartDelay > 0 && c.StartStep == "":
		return invalidArg("startDelay", "the flow has no start step to delay (flow type %q declares none and the start names none)", c.FlowType)
	}
	if err := validateRetry("retryPolicy", c.Retry); err != nil {
		return err
	}
	h := c.TimeoutHandler
	switch {
	case h == nil && c.TimeoutPolicy == TimeoutRunHandler:
		return invalidArg("timeoutHandler", "timeout policy HANDLER needs a timeout handler step")
	case h == nil:
		return nil
	case c.TimeoutPolicy != "" && c.TimeoutPolicy != TimeoutRunHandler:
		return invalidArg("timeoutHandler", "a timeout handler needs timeout policy HANDLER, got %s", c.TimeoutPolicy)
	case c.Timeout <= 0:
		return invalidArg("timeoutHandler", "a timeout handler needs a flow timeout")
	case h.StepType == "":
		return invalidArg("timeoutHandler.stepType", "must not be empty")
	case !stepOK(h.StepType):
		return invalidArg("timeoutHandler.stepType", "step type %q is not declared by flow type %q", h.StepType, c.FlowType)
	case h.Deadline < 0:
		return invalidArg("timeoutHandler.deadline", "must not be negative, got %v", h.Deadline)
	}
	return nil
}

// flowRetryOf resolves a start's retry options (nil: no policy) over the
// server's retry defaults.
func (d *decider) flowRetryOf(c StartFlow, runID string) *FlowRetry {
	if c.Retry == nil {
		return nil
	}
	p := d.e.cfg.defaults().Execute
	overlayMethod(&p, &MethodOptions{Retry: c.Retry})
	return &FlowRetry{Policy: p.Retry, Attempt: 1, FirstRunID: runID, FirstStartedAt: d.now, Timeout: c.Timeout}
}

// timeoutHandlerOf returns the start's timeout handler with its deadline
// defaulted, nil when it has none.
func timeoutHandlerOf(c StartFlow) *TimeoutHandler {
	if c.TimeoutHandler == nil {
		return nil
	}
	h := *c.TimeoutHandler
	if h.Deadline == 0 {
		h.Deadline = DefaultTimeoutHandlerDeadline
	}
	return &h
}

// retryFailed starts the retry of a run this Decide call failed, when its
// flow retry policy allows one (E34). A run is retried when it closed
// FAILED by itself (a step's exhausted retries, a FORCE_FAIL decision, a
// FAIL flow timeout, a timeout handler that failed or missed its deadline),
// never when a client stopped it (CANCEL, TERMINATE, FAIL) or it was
// cancelled by a CANCEL timeout.
func (d *decider) retryFailed() {
	st := d.st
	if st == nil || st.Opts == nil || st.Opts.Retry == nil || st.Status != StatusFailed || st.Close == nil ||
		st.Close.ErrorType == ErrClientAPIFailingFlow || len(d.recs) == 0 {
		return
	}
	last := d.recs[len(d.recs)-1]
	if _, ok := last.Body.(FlowClosed); !ok || last.RunID != st.RunID {
		return
	}
	r := st.Opts.Retry
	j := retryJitter(st.FlowID, r.FirstRunID, "", "flow", r.Attempt)
	at, ok := r.Policy.nextAttempt(Attempt{Number: r.Attempt, FirstAt: r.FirstStartedAt}, d.now, nil, j)
	if !ok {
		return
	}
	runID := retryRunID(r.FirstRunID, r.Attempt+1)
	d.emit(FlowRetried{RetryRunID: runID, Attempt: r.Attempt + 1, NotBefore: at})
	next := r.FlowRetry
	next.Attempt++
	next.RetriedRunID = st.RunID
	started := FlowStarted{FlowType: st.FlowType, RequestID: st.StartRequestID, PreviousRunID: st.RunID,
		StartStep: r.StartStep, Definition: st.Definition, Config: st.Config, TimeoutPolicy: st.TimeoutPolicy,
		Attributes: r.Attributes, PublishRequestIDs: slices.Clone(st.PublishRequestIDs),
		TraceContext: st.TraceContext, StartDelay: at.Sub(d.now), Retry: &next, TimeoutHandler: st.Opts.TimeoutHandler}
	if r.Timeout > 0 {
		started.TimeoutAt = at.Add(r.Timeout)
	}
	d.emitFor(st.FlowID, runID, started)
	if m := r.StartStep; m != nil {
		d.createStepAt(m.StepType, m.Input, m.Options, false, "", at)
	}
}

// runTimeoutHandler handles a HANDLER flow timeout (E34): the active step
// executions end (their late results are refused), and the handler step
// starts in Execute with the deadline armed.
func (d *decider) runTimeoutHandler() {
	h := d.st.timeoutHandler()
	var canceled []string
	for _, s := range d.st.Steps {
		canceled = append(canceled, s.ID)
	}
	id := d.movementIDs([]Movement{{StepType: h.StepType}})[0]
	d.emit(TimeoutHandlerStarted{StepExecID: id, DeadlineAt: d.now.Add(h.Deadline), Canceled: canceled})
	d.createStep(h.StepType, Value{}, nil, true, "")
}

// handlerDeadline fires a timeout handler's deadline: the flow, still
// running, fails with FLOW_TIMEOUT (E34).
func (d *decider) handlerDeadline(due func(time.Time) error) error {
	at := d.st.handlerDeadline()
	if at.IsZero() {
		return timerNotPending("no timeout handler runs")
	}
	if err := due(at); err != nil {
		return err
	}
	d.closeFlow(StatusFailed, ErrFlowTimeout, fmt.Sprintf(
		"flow timed out; its timeout handler did not close it by %s", at.Format(time.RFC3339Nano)))
	return nil
}

// applyFlowRetried and applyTimeoutHandler apply the E34 records.
func applyFlowRetried(st *FlowState, b FlowRetried) {
	if st.Opts == nil {
		st.Opts = &RunOptions{}
	}
	st.Opts.RetryRunID = b.RetryRunID
}

func applyTimeoutHandler(st *FlowState, b TimeoutHandlerStarted) []Effect {
	if !st.Running() {
		return nil
	}
	if st.Opts == nil {
		st.Opts = &RunOptions{}
	}
	// The canceled executions' workers are told, as for a cancellation
	// (E29) or a close: their handlers' contexts end instead of running
	// on to a result that is refused.
	var eff []Effect
	for _, s := range st.Steps {
		if e, ok := st.cancelTask(s, fmt.Sprintf("flow %s run %s timed out: its timeout handler %s runs instead",
			st.FlowID, st.RunID, b.StepExecID)); ok {
			eff = append(eff, e)
		}
	}
	st.Steps, st.TimeoutAt, st.Opts.HandlerDeadlineAt = nil, time.Time{}, b.DeadlineAt
	st.HeartbeatDetails = nil
	return append(eff, ArmTimer{FlowID: st.FlowID, RunID: st.RunID, Timer: Timer{Kind: TimerTimeoutHandler}, At: b.DeadlineAt})
}
