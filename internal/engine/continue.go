package engine

import (
	"fmt"
	"maps"
	"strings"
	"time"
)

// Continue-as-new (E37): a run hands its live state to a new run of the
// same flow ID, so that a long-lived flow's history stays bounded. See
// "Continue-as-new" in the package documentation for the rules.

// StatusContinuedAsNew is the status of a run that continued as a new run
// (E37). It is a closed status: the run takes no more changes.
const StatusContinuedAsNew Status = "CONTINUED_AS_NEW"

// ContinueTrigger says what made a run continue as new (E37).
type ContinueTrigger string

// Continue-as-new triggers.
const (
	// ContinueHistoryLimit: the run's history reached the server's
	// limits.continueAsNewHistoryEvents.
	ContinueHistoryLimit ContinueTrigger = "HISTORY_LIMIT"
	// ContinueDecision: an Execute decision asked for it.
	ContinueDecision ContinueTrigger = "DECISION"
	// ContinueClient: a client's ContinueAsNew call.
	ContinueClient ContinueTrigger = "CLIENT"
)

// DefaultContinueAsNewHistoryEvents is the history length at which a run
// continues as new when Config.ContinueAsNewHistoryEvents is 0.
const DefaultContinueAsNewHistoryEvents = 10_000

// MinContinueAsNewHistoryEvents is the smallest threshold accepted: a new
// run starts with a few events, and a threshold that small would make
// every change continue the run again.
const MinContinueAsNewHistoryEvents = 10

// ContinueAsNew asks the run RunID (required: the exact run) of FlowID to
// continue as a new run now (E37). Records: flow_continued_as_new on the
// run, then the new run's flow_started.
type ContinueAsNew struct {
	FlowID string
	RunID  string
	Reason string
	// RequestID, when set, makes the command safe to retry: once run
	// RunID continued as new by a ContinueAsNew with the same request ID,
	// the retry decides nothing and the node answers that new run.
	RequestID string
}

func (ContinueAsNew) isCommand() {}

// FlowContinuedAsNew is logged on a run that continues as new (E37): the
// run closes CONTINUED_AS_NEW and names its successor NewRunID, whose
// flow_started (ContinuedFrom: this run) follows in the same batch and
// takes the run's live state over. Trigger says why; StepExecID is the
// execution whose decision asked (DECISION).
type FlowContinuedAsNew struct {
	NewRunID   string          `json:"newRunId"`
	Trigger    ContinueTrigger `json:"trigger"`
	Reason     string          `json:"reason,omitempty"`
	StepExecID string          `json:"stepExecId,omitempty"`
	// RequestID is the client's ContinueAsNew request ID (CLIENT), ""
	// when it had none: a retry with it is answered NewRunID.
	RequestID string `json:"requestId,omitempty"`
}

func (FlowContinuedAsNew) recordType() string { return "flow_continued_as_new" }

// Continuation is what a run keeps of its continue-as-new chain (E37):
// the first run of the chain (which names the others), the number of runs
// continued so far, and the run this one continued as (once it did).
//
// From and Carried are set on the new run: the run it continues, and the
// attempts that were RUNNING at the switch ("<step execution>/<method>/<attempt>")
// with the run their tokens name: From, or for an attempt that was
// already carried into From, the run it was carried from, so that an
// attempt running across several continuations keeps its token. Such a
// token stays valid here until its attempt ends; a key is never used
// again (a later attempt has another method or number), so the map needs
// no cleaning.
//
// RequestID is the request ID of the client's ContinueAsNew that
// continued this run (with NewRunID); FromRequestID, on the new run, the
// one that continued From into it: a retry of that request decides
// nothing.
type Continuation struct {
	FirstRunID    string            `json:"firstRunId"`
	Count         int               `json:"count"`
	NewRunID      string            `json:"newRunId,omitempty"`
	Trigger       ContinueTrigger   `json:"trigger,omitempty"`
	RequestID     string            `json:"requestId,omitempty"`
	From          string            `json:"from,omitempty"`
	FromRequestID string            `json:"fromRequestId,omitempty"`
	Carried       map[string]string `json:"carried,omitempty"`
}

func attemptKey(s *StepExec) string {
	return fmt.Sprintf("%s/%s/%d", s.ID, s.Attempt.Method, s.Attempt.Number)
}

// carriedRun is the earlier run whose token s's running attempt was
// handed out under, when a continue-as-new carried it (E37); "" otherwise.
func (st *FlowState) carriedRun(s *StepExec) string {
	if s == nil || st.Opts == nil || st.Opts.Continued == nil || len(st.Opts.Continued.Carried) == 0 ||
		s.Attempt.State != AttemptRunning {
		return ""
	}
	return st.Opts.Continued.Carried[attemptKey(s)]
}

// ContinuedRunID is the run this run continued as, "" when it did not
// (E37).
func (st *FlowState) ContinuedRunID() string {
	if st == nil || st.Opts == nil || st.Opts.Continued == nil {
		return ""
	}
	return st.Opts.Continued.NewRunID
}

// ContinuedByRequest is the run that a client's ContinueAsNew with
// request ID id continued this run as, "" when none did (E37): the answer
// to a retry of it.
func (st *FlowState) ContinuedByRequest(id string) string {
	if id == "" || st == nil || st.Opts == nil || st.Opts.Continued == nil || st.Opts.Continued.RequestID != id {
		return ""
	}
	return st.Opts.Continued.NewRunID
}

// continuedFrom reports whether a client's ContinueAsNew of run with
// request ID id continued it as this run: a retry of it decides nothing
// (E37).
func (st *FlowState) continuedFrom(run, id string) bool {
	c := st.continuation()
	return id != "" && c != nil && c.From == run && c.FromRequestID == id
}

// continuation is the run's place in its continue-as-new chain, nil
// when it has none.
func (st *FlowState) continuation() *Continuation {
	if st == nil || st.Opts == nil {
		return nil
	}
	return st.Opts.Continued
}

// continues reports whether run is an earlier run of this run's
// continue-as-new chain (E37): the first run, or a continuation named
// after it (continuedRunID).
func (st *FlowState) continues(run string) bool {
	c := st.continuation()
	if c == nil || run == "" || run == st.RunID {
		return false
	}
	return run == c.FirstRunID || strings.HasPrefix(run, c.FirstRunID+".continued-")
}

// NextRunID is the run that follows this closed run for the flow ID: its
// flow retry (E34), its continuation or its reset run (E37); "" when none
// does. A run has at most one: only the latest run is retried, continued
// or reset.
func (st *FlowState) NextRunID() string {
	if id := st.ContinuedRunID(); id != "" {
		return id
	}
	if id := st.RetryRunID(); id != "" {
		return id
	}
	return st.ResetRunID()
}

// continuedRunID names the n-th continuation of the chain that starts at
// first. A node-chosen run ID never contains ".continued-", so the name
// cannot collide with one, nor with a retry's (".retry-").
func continuedRunID(first string, n int) string { return fmt.Sprintf("%s.continued-%d", first, n) }

func (c Config) continueThreshold() int {
	if c.ContinueAsNewHistoryEvents > 0 {
		return c.ContinueAsNewHistoryEvents
	}
	return DefaultContinueAsNewHistoryEvents
}

// continueAsNew decides a client's ContinueAsNew (E37).
func (d *decider) continueAsNew(c ContinueAsNew) error {
	if c.RunID == "" {
		return invalidArg("runId", "must name the run to continue as new")
	}
	if len(c.RequestID) > MaxRequestIDBytes {
		return invalidArg("requestId", "is %d bytes, at most %d are allowed", len(c.RequestID), MaxRequestIDBytes)
	}
	if d.st != nil && d.st.FlowID == c.FlowID && c.RunID != d.st.RunID && d.st.continuedFrom(c.RunID, c.RequestID) {
		// A retry of the request that continued c.RunID as this run
		// (its reply was lost): the node answers this run.
		return nil
	}
	if err := d.active(c.FlowID, c.RunID); err != nil {
		return err
	}
	if len(c.Reason) > MaxRequestIDBytes*4 {
		return invalidArg("reason", "must be at most %d bytes, got %d", MaxRequestIDBytes*4, len(c.Reason))
	}
	d.switchRun(ContinueClient, validText(c.Reason), "", c.RequestID)
	return nil
}

// continueIfDue continues the run as new after a command, when a decision
// of this call asked for it or the history reached the threshold (E37).
// Only a call that added history events checks the threshold, so a
// TaskStarted or a heartbeat never switches a run.
func (d *decider) continueIfDue(events int) {
	st := d.st
	if !st.Running() {
		return
	}
	if d.continueReq != nil {
		d.switchRun(ContinueDecision, d.continueReq.reason, d.continueReq.stepExecID, "")
		return
	}
	if len(st.History) > events && len(st.History) >= d.e.cfg.continueThreshold() {
		d.switchRun(ContinueHistoryLimit, fmt.Sprintf("history reached %d events", len(st.History)), "", "")
	}
}

// switchRun logs the continuation: flow_continued_as_new on the run, then
// the new run's flow_started, which carries the run's live state over
// (applyContinued). requestID is a client's ContinueAsNew's.
func (d *decider) switchRun(t ContinueTrigger, reason, stepExecID, requestID string) {
	st := d.st
	first, n := st.RunID, 1
	if st.Opts != nil && st.Opts.Continued != nil {
		first, n = st.Opts.Continued.FirstRunID, st.Opts.Continued.Count+1
	}
	newRun := continuedRunID(first, n)
	d.emit(FlowContinuedAsNew{NewRunID: newRun, Trigger: t, Reason: reason, StepExecID: stepExecID, RequestID: requestID})
	prev := d.st.Opts.carry
	d.emitFor(st.FlowID, newRun, FlowStarted{FlowType: st.FlowType, RequestID: st.StartRequestID,
		PreviousRunID: st.RunID, ContinuedFrom: st.RunID, Definition: st.Definition, Config: st.Config,
		TimeoutAt: prev.TimeoutAt, TimeoutPolicy: st.TimeoutPolicy, PublishRequestIDs: st.PublishRequestIDs,
		TraceContext: st.TraceContext, Parent: st.Parent})
}

// applyContinuedAsNew closes the run CONTINUED_AS_NEW. Its live state
// moves to RunOptions.carry (not encoded) for the new run's flow_started,
// which the same batch applies next; the closed run keeps what a closed
// run keeps (attributes, outputs, history).
func applyContinuedAsNew(st *FlowState, rec Record, b FlowContinuedAsNew) []Effect {
	if !st.Running() {
		return nil
	}
	if st.Opts == nil {
		st.Opts = &RunOptions{}
	} else {
		o := *st.Opts
		st.Opts = &o
	}
	c := Continuation{FirstRunID: st.RunID, Count: 1, NewRunID: b.NewRunID, Trigger: b.Trigger, RequestID: b.RequestID}
	if p := st.Opts.Continued; p != nil {
		c.FirstRunID, c.Count = p.FirstRunID, p.Count+1
		// Kept for the carry: an attempt carried into this run and still
		// running keeps the run its token names (applyContinued).
		c.From, c.FromRequestID, c.Carried = p.From, p.FromRequestID, p.Carried
	}
	st.Opts.Continued = &c
	carry := st.Clone()
	carry.History = nil
	st.Opts.carry = carry
	ci := CloseInfo{Status: StatusContinuedAsNew, Message: continueMessage(b)}
	st.Status, st.Close, st.ClosedAt = StatusContinuedAsNew, &ci, rec.At
	st.Steps, st.TimeoutAt, st.RPCLocks, st.Channels = nil, time.Time{}, nil, nil
	st.HeartbeatDetails = nil
	st.Opts.HandlerDeadlineAt = time.Time{}
	st.event(rec, HistoryEvent{Type: EventFlowClosed, Close: &ci})
	// Its attempts are not cancelled: the new run carries them. The node
	// wakes WaitForFlow callers (they follow to the new run) and drops
	// this run's queued tasks and timers; the new run arms its own.
	return []Effect{NotifyClosed{FlowID: st.FlowID, RunID: st.RunID, Status: StatusContinuedAsNew}}
}

func continueMessage(b FlowContinuedAsNew) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "continued as new run %s (%s", b.NewRunID, b.Trigger)
	if b.StepExecID != "" {
		fmt.Fprintf(&sb, " of %s", b.StepExecID)
	}
	sb.WriteString(")")
	if b.Reason != "" {
		sb.WriteString(": " + b.Reason)
	}
	return sb.String()
}

// applyContinued fills a new run from the live state of the run it
// continues (E37): its step executions with their attempts, waits and
// satisfied conditions, queued messages, attributes, outputs, step
// counters, heartbeat details, the committed RPC call IDs and flow-level
// options. A running attempt
// stays running under the token it was handed out with (Attempt.RunID),
// so its result lands here once; pending attempts are dispatched as this
// run's. RPC lock sets are not carried: a call in flight at the switch is
// refused (its token names the old run) and its caller retries.
func applyContinued(st, from *FlowState) []Effect {
	if from == nil {
		return nil
	}
	st.StepCounters = maps.Clone(from.StepCounters)
	st.Steps = from.Steps
	var carried map[string]string
	for _, s := range st.Steps {
		if s.Attempt.State == AttemptRunning {
			run := from.carriedRun(s) // carried into from already: its token names an earlier run
			if run == "" {
				run = from.RunID
			}
			if carried == nil {
				carried = map[string]string{}
			}
			carried[attemptKey(s)] = run
		}
	}
	st.Channels, st.LastMessageSeq = from.Channels, from.LastMessageSeq
	st.Attributes, st.Outputs, st.GracefulRequested = from.Attributes, from.Outputs, from.GracefulRequested
	st.HeartbeatDetails = from.HeartbeatDetails
	// The committed RPC call IDs, so that a worker's resend of a result
	// that committed in an earlier run of the chain is recognised (E22).
	st.RPCCallIDs = from.RPCCallIDs
	if from.Opts != nil {
		o := *from.Opts
		o.RetryRunID = ""
		if o.Continued != nil {
			c := *o.Continued
			c.From, c.FromRequestID, c.Carried = from.RunID, c.RequestID, carried
			c.NewRunID, c.Trigger, c.RequestID = "", "", ""
			o.Continued = &c
		}
		st.Opts = &o
	}
	var eff []Effect
	for _, t := range st.PendingTasks() {
		eff = append(eff, DispatchTask{TaskRef: t})
	}
	for _, t := range st.Timers() {
		if t.Timer.Kind != TimerFlowTimeout { // applyStarted arms it
			eff = append(eff, t)
		}
	}
	return eff
}

// tokenRun reports whether a token of run runID may address step s of
// this run: the run's own, or the earlier run a running attempt was handed
// out under before a continue-as-new (E37).
func (st *FlowState) tokenRun(runID string, s *StepExec) bool {
	return runID == st.RunID || (runID != "" && st.carriedRun(s) == runID)
}

// runID is the run's ID, "" for no run.
func (st *FlowState) runID() string {
	if st == nil {
		return ""
	}
	return st.RunID
}

// sameChain reports whether run is linked or one of the runs that
// continue it as new (E37): a subflow condition linked to a child's run
// follows the child's continuations.
func sameChain(linked, run string) bool {
	if run == linked {
		return true
	}
	base := linked
	if i := strings.LastIndex(linked, ".continued-"); i >= 0 {
		base = linked[:i]
	}
	return strings.HasPrefix(run, base+".continued-")
}
