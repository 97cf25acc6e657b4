package engine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reset (E37): a new run of the same flow ID from a point of the latest
// run's history. See "Reset" in the package documentation for the rules.

// ResetPointKind names the kind of a reset point (E37).
type ResetPointKind string

// Reset point kinds.
const (
	// ResetBeginning: the run's start, before its start step's first attempt.
	ResetBeginning ResetPointKind = "BEGINNING"
	// ResetStepType: before the first execution of StepType.
	ResetStepType ResetPointKind = "STEP_TYPE"
	// ResetStepExecution: before execution StepExecID's WaitFor, or with
	// BeforeExecute before its Execute (once its WaitFor completed).
	ResetStepExecution ResetPointKind = "STEP_EXECUTION"
	// ResetEventTime: the last eligible point (the beginning, or just
	// after an event that created step executions) at or before Time.
	ResetEventTime ResetPointKind = "EVENT_TIME"
)

// ResetPoint is where a reset starts its new run; exactly one kind.
type ResetPoint struct {
	Kind          ResetPointKind `json:"kind"`
	StepType      string         `json:"stepType,omitempty"`
	StepExecID    string         `json:"stepExecId,omitempty"`
	BeforeExecute bool           `json:"beforeExecute,omitempty"`
	Time          time.Time      `json:"time,omitzero"`
}

// ResetFlow resets run RunID (the flow ID's latest; it must be named) of
// FlowID to Point as the new run NewRunID (E37). Records: FlowClosed
// (TERMINATED) of the old run when it is running, FlowReset on the old
// run, FlowStarted of the new run carrying the state at the point, the
// step executions active at the point created again, then the client
// writes re-applied (unless SkipReapply).
type ResetFlow struct {
	FlowID      string
	RunID       string
	NewRunID    string // chosen by the node, unique
	Point       ResetPoint
	SkipReapply bool
	Reason      string
	// RequestID, when set, makes the command safe to retry: once run
	// RunID was reset by a ResetFlow with the same request ID, the retry
	// decides nothing and the node answers that reset's new run.
	RequestID string
	// Definition and Config are the flow type's declaration as known
	// now (a fixed worker's); nil: the old run's.
	Definition *FlowDefinition
	Config     *StepOptions
}

func (ResetFlow) isCommand() {}

// FlowReset is logged on the reset run, after its FlowClosed if it was
// running: ResetRunID is the new run (its FlowStarted follows) (E37).
type FlowReset struct {
	ResetRunID string     `json:"resetRunId"`
	Point      ResetPoint `json:"point"`
	Reason     string     `json:"reason,omitempty"`
	// RequestID is the ResetFlow's request ID, "" when it had none: a
	// retry with it is answered ResetRunID.
	RequestID string `json:"requestId,omitempty"`
}

func (FlowReset) recordType() string { return "flow_reset" }

// ResetStart is what a reset run's FlowStarted carries beside the
// ordinary start fields: the link to the reset run, the point, and the
// state at the point that the step executions and attributes do not hold
// (E37). PointEventID is the first event of the reset run that was after
// the point.
type ResetStart struct {
	ResetRunID   string     `json:"resetRunId"`
	Point        ResetPoint `json:"point"`
	PointEventID int        `json:"pointEventId"`
	Reason       string     `json:"reason,omitempty"`
	SkipReapply  bool       `json:"skipReapply,omitempty"`
	// RequestID is the ResetFlow's request ID ("" when none): a retry of
	// it that finds this run the latest decides nothing.
	RequestID         string               `json:"requestId,omitempty"`
	StepCounters      map[string]int       `json:"stepCounters,omitempty"`
	Channels          map[string][]Message `json:"channels,omitempty"`
	LastMessageSeq    uint64               `json:"lastMessageSeq,omitempty"`
	Outputs           []Output             `json:"outputs,omitempty"`
	GracefulRequested bool                 `json:"gracefulRequested,omitempty"`
	// Steps are the executions active at the point; their step_created
	// records follow. Here too so that the run's own history rebuilds
	// its beginning (a reset of a reset run).
	Steps []ResetStep `json:"steps,omitempty"`
}

// ResetStep is a step execution a reset run creates again: the
// execution active at the point, with its ID, input, parent and the
// options of the movement that created it (E37). ToExecute: the reset
// run starts it at its Execute, its WaitFor having returned Wait (nil:
// no wait); a later reset of the reset run does too while it is active
// at the point (see "Reset" in the package documentation).
type ResetStep struct {
	StepExecID  string       `json:"stepExecId"`
	StepType    string       `json:"stepType"`
	N           int          `json:"n"`
	Input       Value        `json:"input"`
	ParentID    string       `json:"parentId,omitempty"`
	Options     *StepOptions `json:"options,omitempty"`
	SkipWaitFor bool         `json:"skipWaitFor,omitempty"`
	ToExecute   bool         `json:"toExecute,omitempty"`
	Wait        *StoredWait  `json:"wait,omitempty"`
}

// ResetRunID is the run that a reset of this run started, "" when there
// is none (E37).
func (st *FlowState) ResetRunID() string {
	if st == nil || st.Opts == nil {
		return ""
	}
	return st.Opts.ResetRunID
}

func applyFlowReset(st *FlowState, b FlowReset) {
	if st.Opts == nil {
		st.Opts = &RunOptions{}
	}
	st.Opts.ResetRunID, st.Opts.ResetRequestID = b.ResetRunID, b.RequestID
}

// ResetByRequest is the run that a ResetFlow with request ID id started
// from this run, "" when none did (E37): the answer to a retry of it.
func (st *FlowState) ResetByRequest(id string) string {
	if id == "" || st == nil || st.Opts == nil || st.Opts.ResetRequestID != id {
		return ""
	}
	return st.Opts.ResetRunID
}

// resetFrom reports whether a ResetFlow of run with request ID id started
// this run: a retry of it decides nothing (E37).
func (st *FlowState) resetFrom(run, id string) bool {
	if id == "" || len(st.History) == 0 || st.History[0].Start == nil {
		return false
	}
	r := st.History[0].Start.Reset
	return r != nil && r.ResetRunID == run && r.RequestID == id
}

// resetStep is a step execution as the history rebuilds it.
type resetStep struct {
	id, typ     string
	n           int
	input       Value
	parent      string
	override    *StepOptions
	skipWaitFor bool
	wait        *StoredWait // the Wait its WaitFor returned
	waitForDone bool
	// toExecute: a reset run's start began it at its Execute
	// (ResetStep.ToExecute); a reset of that run begins it there again.
	toExecute bool
}

// pointState is the state of a run before one of its history events, as
// its earlier events rebuild it.
type pointState struct {
	attrs    map[string]Value
	steps    []*resetStep
	counters map[string]int
	outputs  []Output
	graceful bool
	seq      uint64 // messages published so far
}

func (p *pointState) step(id string) *resetStep {
	for _, s := range p.steps {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (p *pointState) remove(id string) {
	p.steps = slices.DeleteFunc(p.steps, func(s *resetStep) bool { return s.id == id })
}

func (p *pointState) create(id string, m Movement, parent string) {
	typ, n := m.StepType, 0
	if i := strings.LastIndexByte(id, '-'); i >= 0 {
		n, _ = strconv.Atoi(id[i+1:])
	}
	if n > p.counters[typ] {
		p.counters[typ] = n
	}
	p.steps = append(p.steps, &resetStep{id: id, typ: typ, n: n, input: m.Input, parent: parent,
		override: m.Options, skipWaitFor: m.SkipWaitFor})
}

func (p *pointState) setAttrs(ws []AttributeWrite) {
	for _, w := range ws {
		p.attrs[w.Name] = w.Value
	}
}

func (p *pointState) staged(s Staged) {
	p.setAttrs(s.Attributes)
	p.seq += uint64(len(s.Publishes))
}

// rebuild replays the events of st before event ID upTo (1-based) into a
// pointState. recovery resolves the recovery step of a step whose Execute
// ran out of retries ("" when none, the flow closed).
func rebuild(st *FlowState, upTo int, recovery func(*resetStep) string) *pointState {
	p := &pointState{attrs: map[string]Value{}, counters: map[string]int{}}
	for _, ev := range st.History {
		if ev.ID >= upTo {
			break
		}
		p.apply(ev, recovery)
	}
	return p
}

// apply replays one event; it reports whether the event created step
// executions (it ends an eligible reset point).
func (p *pointState) apply(ev *HistoryEvent, recovery func(*resetStep) string) bool {
	switch ev.Type {
	case EventFlowStarted:
		if ev.Start != nil {
			p.setAttrs(ev.Start.Attributes)
			if r := ev.Start.Reset; r != nil {
				maps.Copy(p.counters, r.StepCounters)
				p.seq, p.graceful, p.outputs = r.LastMessageSeq, r.GracefulRequested, slices.Clone(r.Outputs)
				for _, rs := range r.Steps {
					p.steps = append(p.steps, &resetStep{id: rs.StepExecID, typ: rs.StepType, n: rs.N, input: rs.Input,
						parent: rs.ParentID, override: rs.Options, skipWaitFor: rs.SkipWaitFor,
						toExecute: rs.ToExecute, wait: rs.Wait, waitForDone: rs.ToExecute})
				}
				return len(r.Steps) > 0
			}
			if ss := ev.Start.StartStep; ss != nil && ev.Start.StartStepExecID != "" {
				p.create(ev.Start.StartStepExecID, *ss, "")
				return true
			}
		}
	case EventWaitForCompleted:
		p.staged(ev.Staged)
		if s := p.step(ev.StepExecID); s != nil {
			s.waitForDone, s.wait = true, ev.Wait
		}
	case EventExecuteCompleted:
		p.staged(ev.Staged)
		p.remove(ev.StepExecID)
		if dec := ev.Decision; dec != nil {
			switch dec.Kind {
			case DecideGracefulComplete:
				p.graceful = true
				p.outputs = append(p.outputs, Output{StepType: ev.StepType, StepExecID: ev.StepExecID, Value: dec.Output})
			case DecideForceComplete:
				p.outputs = append(p.outputs, Output{StepType: ev.StepType, StepExecID: ev.StepExecID, Value: dec.Output})
			}
			for i, id := range ev.Scheduled {
				if i < len(dec.Movements) {
					p.create(id, dec.Movements[i], ev.StepExecID)
				}
			}
		}
		return len(ev.Scheduled) > 0
	case EventRPCCompleted:
		p.staged(ev.Staged)
		for i, id := range ev.Scheduled {
			if i < len(ev.Movements) {
				p.create(id, ev.Movements[i], "rpc:"+ev.RPC)
			}
		}
		return len(ev.Scheduled) > 0
	case EventAttributesSet:
		p.setAttrs(ev.Attributes)
	case EventChannelPublished:
		p.seq += uint64(len(ev.Publishes))
	case EventStepCanceled:
		p.remove(ev.StepExecID)
	case EventExecuteFailed:
		s := p.step(ev.StepExecID)
		if s == nil || !ev.NextAttemptAt.IsZero() {
			break
		}
		// The retries ran out: the step ends; its recovery step, if it
		// has one, starts with its input (E12). Without one the flow
		// closed (FLOW_CLOSED follows).
		p.remove(s.id)
		if typ := recovery(s); typ != "" {
			p.create(stepExecID(typ, p.counters[typ]+1), Movement{StepType: typ, Input: s.input}, s.id)
			return true
		}
	}
	return false
}

// resetPoint finds the event ID a reset point is before (1-based: the
// events with smaller IDs make the state at the point), checking that it
// exists in st's history.
func (d *decider) resetPoint(pt ResetPoint, recovery func(*resetStep) string) (int, error) {
	st := d.st
	closedAt := len(st.History) + 1 // no point after FLOW_CLOSED
	for _, ev := range st.History {
		if ev.Type == EventFlowClosed {
			closedAt = ev.ID
			break
		}
	}
	// created lists, for every event that created step executions, the
	// IDs it created.
	p := &pointState{attrs: map[string]Value{}, counters: map[string]int{}}
	var (
		creators []*HistoryEvent
		created  = map[string]int{} // step exec ID -> the event that created it
		firstOf  = map[string]int{} // step type -> event of its first creation
		waited   = map[string]int{} // step exec ID -> its WAIT_FOR_COMPLETED
		waits    = map[string]*StoredWait{}
	)
	for _, ev := range st.History {
		if ev.ID >= closedAt {
			break
		}
		before := map[string]bool{}
		for _, s := range p.steps {
			before[s.id] = true
		}
		if p.apply(ev, recovery) {
			creators = append(creators, ev)
			for _, s := range p.steps {
				if !before[s.id] {
					created[s.id] = ev.ID
					if _, ok := firstOf[s.typ]; !ok {
						firstOf[s.typ] = ev.ID
					}
				}
			}
		}
		if ev.Type == EventWaitForCompleted {
			if _, ok := waited[ev.StepExecID]; !ok {
				waited[ev.StepExecID], waits[ev.StepExecID] = ev.ID, ev.Wait
			}
		}
	}
	switch pt.Kind {
	case ResetBeginning:
		return 2, nil
	case ResetStepType:
		id, ok := firstOf[pt.StepType]
		if !ok {
			return 0, resetPointErr("point.stepType", "run %s has no execution of step type %q", st.RunID, pt.StepType)
		}
		return id + 1, nil
	case ResetStepExecution:
		id, ok := created[pt.StepExecID]
		if !ok {
			return 0, resetPointErr("point.stepExecId", "run %s has no step execution %s", st.RunID, pt.StepExecID)
		}
		if !pt.BeforeExecute {
			return id + 1, nil
		}
		w, ok := waited[pt.StepExecID]
		if !ok {
			return 0, resetPointErr("point.beforeExecute", "step execution %s of run %s never completed its WaitFor; reset before its WaitFor instead",
				pt.StepExecID, st.RunID)
		}
		if wait := waits[pt.StepExecID]; wait != nil {
			for _, c := range wait.Conditions {
				if c.Kind != CondTimer {
					return 0, resetPointErr("point.beforeExecute", "step execution %s waited for a %s condition, whose results the history does not keep; reset before its WaitFor instead",
						pt.StepExecID, strings.ToLower(string(c.Kind)))
				}
			}
		}
		return w + 1, nil
	case ResetEventTime:
		if pt.Time.Before(st.StartedAt) {
			return 0, resetPointErr("point.time", "run %s started at %s, after %s", st.RunID,
				st.StartedAt.Format(time.RFC3339Nano), pt.Time.Format(time.RFC3339Nano))
		}
		at := 2
		for _, ev := range creators {
			if !ev.At.After(pt.Time) {
				at = max(at, ev.ID+1)
			}
		}
		return at, nil
	}
	return 0, invalidArg("point.kind", "unknown reset point kind %q", pt.Kind)
}

func resetPointErr(field, format string, args ...any) error {
	return &Error{Code: CodeFailedPrecondition, Field: field, Message: fmt.Sprintf(format, args...)}
}

func validateResetPoint(pt ResetPoint) error {
	extra := func(field string) error {
		return invalidArg(field, "is not used by a %s reset point (exactly one point)", pt.Kind)
	}
	switch pt.Kind {
	case ResetBeginning, ResetStepType, ResetStepExecution, ResetEventTime:
	case "":
		return invalidArg("point", "must be set: BEGINNING, STEP_TYPE, STEP_EXECUTION or EVENT_TIME")
	default:
		return invalidArg("point.kind", "unknown reset point kind %q", pt.Kind)
	}
	switch {
	case pt.Kind == ResetStepType && pt.StepType == "":
		return invalidArg("point.stepType", "must not be empty")
	case pt.Kind == ResetStepExecution && pt.StepExecID == "":
		return invalidArg("point.stepExecId", "must not be empty")
	case pt.Kind == ResetEventTime && pt.Time.IsZero():
		return invalidArg("point.time", "must be set")
	case pt.Kind != ResetStepType && pt.StepType != "":
		return extra("point.stepType")
	case pt.Kind != ResetStepExecution && pt.StepExecID != "":
		return extra("point.stepExecId")
	case pt.Kind != ResetStepExecution && pt.BeforeExecute:
		return extra("point.beforeExecute")
	case pt.Kind != ResetEventTime && !pt.Time.IsZero():
		return extra("point.time")
	}
	return nil
}

// reset decides ResetFlow (E37).
func (d *decider) reset(c ResetFlow) error {
	if c.FlowID == "" {
		return invalidArg("flowId", "must not be empty")
	}
	if c.RunID == "" {
		return invalidArg("runId", "must name the run to reset")
	}
	if c.NewRunID == "" {
		return invalidArg("newRunId", "must not be empty")
	}
	if err := validateResetPoint(c.Point); err != nil {
		return err
	}
	if len(c.RequestID) > MaxRequestIDBytes {
		return invalidArg("requestId", "is %d bytes, at most %d are allowed", len(c.RequestID), MaxRequestIDBytes)
	}
	if d.st == nil || d.st.FlowID != c.FlowID {
		return notFound(c.FlowID)
	}
	old := d.st
	if c.RunID != old.RunID && old.resetFrom(c.RunID, c.RequestID) {
		// A retry of the reset that started this run (its reply was
		// lost): the node answers this run.
		return nil
	}
	if c.RunID != old.RunID {
		return resetPointErr("runId", "run %s is not the latest run of flow %q (the latest is %s); reset names the latest run",
			c.RunID, c.FlowID, old.RunID)
	}
	if c.NewRunID == old.RunID {
		return invalidArg("newRunId", "run ID %s is already used", c.NewRunID)
	}
	if old.Parent != nil {
		return resetPointErr("runId", "run %s is a subflow of flow %q: reset its parent instead", old.RunID, old.Parent.FlowID)
	}
	// A continuation took its state over from the run before it, outside
	// its history (continue.go): the history cannot rebuild a point.
	if len(old.History) > 0 && old.History[0].Start != nil && old.History[0].Start.ContinuedFrom != "" {
		return resetPointErr("runId", "run %s continued run %s as new: its history does not hold the state it took over, so no point of it can be rebuilt; a run started by continue-as-new cannot be reset",
			old.RunID, old.History[0].Start.ContinuedFrom)
	}
	def, config := old.Definition, old.Config
	if c.Definition != nil && c.Definition.Type == old.FlowType {
		def = c.Definition
		if c.Config != nil {
			config = c.Config
		}
	}
	defaults := d.e.cfg.defaults()
	recovery := func(s *resetStep) string {
		var own *StepOptions
		if def != nil {
			own = def.Steps[s.typ].Options
		}
		return resolveOptions(defaults, s.override, own, config).RecoveryStep
	}
	at, err := d.resetPoint(c.Point, recovery)
	if err != nil {
		return err
	}
	p := rebuild(old, at, recovery)
	reason := validText(c.Reason)
	// The messages the waits of the old run's active executions hold,
	// read before the close below ends them (see "The state at the point").
	type heldMessage struct {
		channel string
		m       Message
	}
	var held []heldMessage
	for _, s := range old.Steps {
		if s.Wait != nil {
			for _, c := range s.Wait.Conditions {
				for _, m := range c.Messages {
					held = append(held, heldMessage{c.Channel, m})
				}
			}
		}
	}

	if old.Running() {
		msg := fmt.Sprintf("reset: run %s continues from %s", c.NewRunID, pointText(c.Point))
		if reason != "" {
			msg += ": " + reason
		}
		d.closeFlow(StatusTerminated, "", msg)
	}
	d.emit(FlowReset{ResetRunID: c.NewRunID, Point: c.Point, Reason: reason, RequestID: c.RequestID})

	// The state at the point.
	rs := &ResetStart{ResetRunID: old.RunID, Point: c.Point, PointEventID: at, Reason: reason,
		SkipReapply: c.SkipReapply, RequestID: c.RequestID, StepCounters: p.counters, LastMessageSeq: p.seq,
		Outputs: p.outputs, GracefulRequested: p.graceful}
	if len(rs.StepCounters) == 0 {
		rs.StepCounters = nil
	}
	for _, s := range p.steps {
		// The target of a point before an Execute starts at its Execute,
		// the target of a point before a WaitFor at its WaitFor; any other
		// execution as its run's start began it (toExecute, E37).
		if c.Point.Kind == ResetStepExecution && s.id == c.Point.StepExecID {
			s.toExecute = c.Point.BeforeExecute
		}
		r := ResetStep{StepExecID: s.id, StepType: s.typ, N: s.n, Input: s.input,
			ParentID: s.parent, Options: s.override, SkipWaitFor: s.skipWaitFor, ToExecute: s.toExecute}
		if s.toExecute {
			r.Wait = s.wait
		}
		rs.Steps = append(rs.Steps, r)
	}
	// Messages published before the point that the old run has not
	// consumed for good: those still queued, and those the waits of its
	// active step executions hold (every execution the reset run
	// recreates starts again from its WaitFor, and one created after the
	// point took its messages after it), back in publish order. The
	// history does not say which step took which message, so the messages
	// of executions that have ended since the point are not carried.
	keep := func(ch string, m Message) {
		if m.Seq <= p.seq {
			if rs.Channels == nil {
				rs.Channels = map[string][]Message{}
			}
			rs.Channels[ch] = append(rs.Channels[ch], m)
		}
	}
	for ch, q := range old.Channels {
		for _, m := range q {
			keep(ch, m)
		}
	}
	for _, h := range held {
		keep(h.channel, h.m)
	}
	for _, q := range rs.Channels {
		slices.SortFunc(q, func(a, b Message) int {
			switch {
			case a.Seq < b.Seq:
				return -1
			case a.Seq > b.Seq:
				return 1
			}
			return 0
		})
	}
	names := slices.Sorted(maps.Keys(p.attrs))
	var attrs []AttributeWrite
	for _, n := range names {
		attrs = append(attrs, AttributeWrite{Name: n, Value: p.attrs[n]})
	}
	// The start's request ID stays the flow's, as a retry and a
	// continuation keep it: a StartFlow retried after a lost reply is
	// recognised, not taken for a new start that ends the reset run.
	started := FlowStarted{FlowType: old.FlowType, RequestID: old.StartRequestID, PreviousRunID: old.RunID, Definition: def, Config: config,
		TimeoutPolicy: old.TimeoutPolicy, Attributes: attrs, PublishRequestIDs: slices.Clone(old.PublishRequestIDs),
		TraceContext: old.TraceContext, Reset: rs}
	if old.Opts != nil {
		started.TimeoutHandler = old.Opts.TimeoutHandler
	}
	if first := old.History; len(first) > 0 && first[0].Start != nil && first[0].Start.Timeout > 0 {
		started.TimeoutAt = d.now.Add(first[0].Start.Timeout)
	}
	d.emitFor(c.FlowID, c.NewRunID, started)

	// The step executions active at the point start again.
	for _, s := range p.steps {
		d.recreateStep(s, def, config, s.toExecute)
	}
	if !c.SkipReapply {
		d.reapply(old, at)
	}
	if d.st.Running() {
		d.evaluate()
		d.branchEnded()
	}
	return nil
}

// recreateStep creates step execution s of the point again with its ID,
// input and parent; it starts at its WaitFor, or at its Execute when it
// has none or toExecute (its WaitFor's timer wait counts as fired).
func (d *decider) recreateStep(s *resetStep, def *FlowDefinition, config *StepOptions, toExecute bool) {
	var own *StepOptions
	hasWaitFor := true
	if def != nil {
		sd := def.Steps[s.typ]
		own, hasWaitFor = sd.Options, sd.HasWaitFor
	}
	hasWaitFor = hasWaitFor && !s.skipWaitFor
	created := StepCreated{StepExecID: s.id, StepType: s.typ, N: s.n, Input: s.input, ParentID: s.parent,
		Options: resolveOptions(d.e.cfg.defaults(), s.override, own, config), HasWaitFor: hasWaitFor}
	if def == nil {
		created.Override = s.override
	}
	d.emit(created)
	if toExecute && hasWaitFor && s.wait != nil {
		d.emit(WaitForCompleted{StepExecID: s.id, Wait: s.wait})
		for i := range s.wait.Conditions {
			d.emit(WaitTimerFired{StepExecID: s.id, Index: i})
		}
		return // evaluate schedules its Execute
	}
	m := MethodWaitFor
	if toExecute || !hasWaitFor {
		m = MethodExecute
	}
	d.emit(AttemptScheduled{StepExecID: s.id, Method: m, Attempt: 1, FirstAt: d.now, NotBefore: d.now})
}

// reapply re-applies the client writes of old from event at on to the new
// run: attribute sets, channel publishes and the writes of RPCs (E37).
func (d *decider) reapply(old *FlowState, at int) {
	for _, ev := range old.History {
		if ev.ID < at {
			continue
		}
		switch ev.Type {
		case EventAttributesSet:
			d.emit(AttributesSet{Attributes: ev.Attributes})
		case EventChannelPublished:
			// The request ID is already among the run's (FlowStarted).
			d.emit(ChannelPublished{Messages: ev.Publishes})
		case EventRPCCompleted:
			if len(ev.Staged.Attributes) > 0 {
				d.emit(AttributesSet{Attributes: ev.Staged.Attributes})
			}
			if len(ev.Staged.Publishes) > 0 {
				d.emit(ChannelPublished{Messages: ev.Staged.Publishes})
			}
		}
	}
}

func pointText(pt ResetPoint) string {
	switch pt.Kind {
	case ResetStepType:
		return "before the first " + pt.StepType
	case ResetStepExecution:
		if pt.BeforeExecute {
			return "before the Execute of " + pt.StepExecID
		}
		return "before " + pt.StepExecID
	case ResetEventTime:
		return "the last point at or before " + pt.Time.Format(time.RFC3339Nano)
	}
	return "the beginning"
}

// applyResetStart sets the state at the point of a reset run's start.
func applyResetStart(st *FlowState, r *ResetStart) {
	st.StepCounters = maps.Clone(r.StepCounters)
	if len(r.Channels) > 0 {
		st.Channels = make(map[string][]Message, len(r.Channels))
		for k, q := range r.Channels {
			st.Channels[k] = slices.Clone(q)
		}
	}
	st.LastMessageSeq = r.LastMessageSeq
	st.Outputs = slices.Clone(r.Outputs)
	st.GracefulRequested = r.GracefulRequested
}
