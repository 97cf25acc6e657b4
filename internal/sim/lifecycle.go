package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/serving"
)

// The workload's run lifecycle traffic (E37): reset flows and count
// flows (see the workload in workload.go).

// countMsgs is how many messages a count flow's client publishes, and the
// count its flow completes with.
const countMsgs = 4

// defaultContinueAfter is the sim's limits.continueAsNewHistoryEvents
// (the least allowed): a count flow's run reaches it after three
// messages (three events each) unless a continuation came first, the
// other flows' runs (five to eight events) only after failed attempts.
const defaultContinueAfter = engine.MinContinueAsNewHistoryEvents

// resetPoints are the points a reset flow's client resets to (E37): the
// beginning, before the first R2, before R3-1.
var resetPoints = []engine.ResetPoint{
	{Kind: engine.ResetBeginning},
	{Kind: engine.ResetStepType, StepType: "R2"},
	{Kind: engine.ResetStepExecution, StepExecID: "R3-1"},
}

// resetAck is a reset of run from that made run to.
type resetAck struct {
	from, to string
	point    engine.ResetPoint
	// lost: the node's answer got lost; a read of run from found its
	// forward link.
	lost bool
}

// continueAck is a client's continue-as-new of run, with its reason.
type continueAck struct {
	run, reason string
	lost        bool
}

// message returns the one message an Execute task's single condition
// took.
func message(t *engine.Task) (engine.Value, bool) {
	if t.Results != nil && len(t.Results.Conditions) == 1 && len(t.Results.Conditions[0].Messages) == 1 {
		return t.Results.Conditions[0].Messages[0].Value, true
	}
	return engine.Value{}, false
}

func incMessage(flowID string, n int) engine.Value { return str(fmt.Sprintf("inc:%s:%d", flowID, n)) }

// count is C's Execute: its input n is the messages counted so far (the
// value every continuation carries), its message must be message n.
// In half the flows (decisionContinues), the movement of n = 1 (C-2's) asks for
// continue-as-new (a decision, E37); the history limit and the client
// continue the other runs.
func count(t *engine.Task) engine.Decision {
	fail := func(format string, args ...any) engine.Decision {
		return engine.Decision{Kind: engine.DecideForceFail, Reason: fmt.Sprintf(format, args...)}
	}
	raw, err := strconv.Unquote(string(t.Input.Data))
	if err != nil {
		return fail("C input %s: %v", t.Input.Data, err)
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return fail("C input %q: %v", raw, err)
	}
	m, ok := message(t)
	if want := incMessage(t.FlowID, n); !ok || m.Type != want.Type || string(m.Data) != string(want.Data) {
		return fail("%s (count %d) took message %s, want %s (lost, repeated or out of order)", t.StepExecID, n, m.Data, want.Data)
	}
	if n+1 == countMsgs {
		return engine.Decision{Kind: engine.DecideGracefulComplete, Output: str(fmt.Sprintf("count:%s:%d", t.FlowID, n+1))}
	}
	return engine.Decision{Kind: engine.DecideMovements, ContinueAsNew: n == 1 && decisionContinues(t.FlowID),
		Movements: []engine.Movement{{StepType: "C", Input: str(strconv.Itoa(n + 1))}}}
}

// decisionContinues: the flows (every other count flow, f06, f20, ...)
// whose C-2 decision asks for continue-as-new.
func decisionContinues(flowID string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(flowID, "f"))
	return err == nil && n%2 == 0
}

// setClient sets a flow's attribute "client" (retried until acknowledged;
// the reset and count flows cannot close before their client publishes).
func (s *sim) setClient(ctx context.Context, flowID string, try tryFunc) bool {
	v := str("c:" + flowID)
	called := time.Now()
	if !try("set attribute", func(ctx context.Context, c *serving.Core) error {
		_, err := c.Command(ctx, flowID, engine.SetAttributes{FlowID: flowID,
			Attributes: []engine.AttributeWrite{{Name: "client", Value: v}}})
		return err
	}) {
		s.hist.unsureClient(flowID)
		return false
	}
	s.hist.add(flowID, histOp{kind: opSetClient}, called, time.Now())
	s.ledger.mu.Lock()
	s.ledger.attr(flowID, "client", v)
	s.ledger.mu.Unlock()
	s.read(ctx, flowID)
	return true
}

// publish publishes v on ch with a request ID, retried until acknowledged.
func (s *sim) publish(flowID, req, ch string, v engine.Value, try tryFunc) bool {
	if !try("publish", func(ctx context.Context, c *serving.Core) error {
		_, err := c.Command(ctx, flowID, engine.PublishToChannel{FlowID: flowID, RequestID: req,
			Messages: []engine.Publish{{Channel: ch, Value: v}}})
		return err
	}) {
		return false
	}
	s.ledger.mu.Lock()
	s.ledger.acks++
	s.ledger.mu.Unlock()
	return true
}

// readRun reads run runID of a flow from a process that serves before and
// after the read (the FlowService's read gate, L15); nil when it could not.
func readRun(ctx context.Context, c *serving.Core, flowID, runID string) *engine.FlowState {
	st, err := c.Flow(ctx, flowID, runID)
	if err != nil || st == nil || !c.Serving() {
		return nil
	}
	return st
}

// resetClient drives a reset flow after its start: set "client", publish
// its message, then reset it once or twice (E37), each time to a point of
// the seed's, while the run runs (after up to 600 ms) or once it closed.
// Each reset names the exact run it resets, the one the client knows
// (the start's, then the previous reset's), with a request ID. A try
// whose answer got lost is sent again with it and must be answered with
// the first send's run (issue 14); after a try that failed, a read of the
// run tells whether the reset landed (its forward link, made by this
// request ID), and a reset never lands twice (resetTry.try). After some
// resets the client sends its StartFlow again.
func (s *sim) resetClient(ctx context.Context, flowID, cur string, try tryFunc) bool {
	if !s.setClient(ctx, flowID, try) || !s.publish(flowID, "pub-"+flowID, "go", published(flowID), try) {
		return false
	}
	n := 1
	if hash(s.cfg.Seed, flowID, 20)%3 == 0 {
		n = 2
	}
	var prev engine.ResetPoint
	for i := range uint64(n) {
		pt := resetPoints[hash(s.cfg.Seed, flowID, 21+2*i)%uint64(len(resetPoints))]
		if pt.Kind == engine.ResetStepType && prev.Kind == engine.ResetStepExecution {
			// A run reset to R3-1 starts after R2: its history has no
			// R2 to reset to.
			pt = resetPoints[0]
		}
		prev = pt
		if hash(s.cfg.Seed, flowID, 22+2*i)%2 == 1 {
			if !try("wait for the run", func(ctx context.Context, c *serving.Core) error {
				st, err := c.WaitForFlow(ctx, flowID, cur)
				if err == nil && st.Running() {
					err = fmt.Errorf("run %s still running", cur)
				}
				return err
			}) {
				return false
			}
		} else if !lease.Sleep(ctx, time.Duration(hash(s.cfg.Seed, flowID, 40+i)%600)*time.Millisecond) {
			return false
		}
		to, ok := s.resetOnce(ctx, flowID, cur, pt, fmt.Sprintf("sim reset %d", i))
		if !ok {
			return ctx.Err() == nil
		}
		cur = to
		if hash(s.cfg.Seed, flowID, 50+i)%3 == 0 && !s.restartLate(ctx, flowID, try) {
			return false
		}
	}
	return true
}

// resetOnce resets run cur to pt, retrying until it knows the outcome;
// ok is false when the reset did not happen (ctx ended, or the run
// continued as new: a continuation cannot be reset).
func (s *sim) resetOnce(ctx context.Context, flowID, cur string, pt engine.ResetPoint, reason string) (to string, ok bool) {
	r := &resetTry{s: s, flowID: flowID, cur: cur, pt: pt, reason: reason, need: pt.StepType + pt.StepExecID,
		requestID: "reset-" + cur}
	called := time.Now()
	for ctx.Err() == nil {
		p, c := s.serving()
		if c == nil || !p.gate.wait() {
			lease.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		to, done, ok := r.try(cctx, c)
		cancel()
		if done {
			if ok {
				s.hist.add(flowID, histOp{kind: opReset}, called, time.Now())
			}
			return to, ok
		}
		lease.Sleep(ctx, 100*time.Millisecond)
	}
	return "", false
}

// resetTry is the state of one resetOnce.
type resetTry struct {
	s                         *sim
	flowID, cur, need, reason string
	requestID                 string
	pt                        engine.ResetPoint
	// lost is the run of an answer the client dropped (a reply lost on
	// its way: the reset landed, the client does not know).
	lost string
}

// try is one try of resetOnce; done when the outcome is known.
func (r *resetTry) try(ctx context.Context, c *serving.Core) (to string, done, ok bool) {
	s, flowID, cur, pt := r.s, r.flowID, r.cur, r.pt
	reset := engine.ResetFlow{FlowID: flowID, RunID: cur, Point: pt, Reason: r.reason, RequestID: r.requestID}
	if r.lost != "" {
		// The retry after a lost answer goes out as the SDK sends it, with
		// the same request ID, before anything is read: it must be
		// answered with the run the first send made (issue 14), not
		// refused, and a second new run would be a double reset.
		res, err := c.Command(ctx, flowID, reset)
		code := engine.CodeOf(err)
		switch {
		case err == nil && res.RunID != r.lost:
			s.fail("reset of %s run %s landed twice: runs %s and %s (its first answer got lost)", flowID, cur, r.lost, res.RunID)
		case err == nil:
			s.count("reset retried after a lost answer: answered its run")
			s.ackReset(flowID, resetAck{from: cur, to: res.RunID, point: pt, lost: true})
			return res.RunID, true, true
		case code == engine.CodeFailedPrecondition || code == engine.CodeNotFound || code == engine.CodeInvalidArgument:
			s.fail("reset of %s run %s (request ID %s) landed as run %s, its retry was refused: %v", flowID, cur, r.requestID, r.lost, err)
			r.lost = ""
		default:
			return "", false, false // not serving: send it again
		}
	}
	st := readRun(ctx, c, flowID, cur)
	if st == nil {
		return "", false, false
	}
	switch {
	case st.ResetRunID() != "":
		// An earlier try landed; its answer got lost.
		if st.ResetByRequest(r.requestID) != st.ResetRunID() {
			s.fail("run %s of %s was reset as run %s, not by the client's request %s", cur, flowID, st.ResetRunID(), r.requestID)
		}
		s.count("reset landed, its answer lost")
		s.event("client: reset of %s run %s landed (run %s), its answer got lost", flowID, cur, st.ResetRunID())
		s.ackReset(flowID, resetAck{from: cur, to: st.ResetRunID(), point: pt, lost: true})
		return st.ResetRunID(), true, true
	case st.ContinuedRunID() != "":
		// The history limit continued it first: its continuation cannot
		// be reset (E37).
		s.count("reset skipped: the run continued as new")
		s.event("client: %s run %s continued as new before its reset", flowID, cur)
		return "", true, false
	case len(st.History) > 0 && st.History[0].Start != nil && st.History[0].Start.ContinuedFrom != "":
		// A continuation: its history does not hold the state it took
		// over, the engine refuses to reset it (E37).
		s.count("reset skipped: a continuation")
		return "", true, false
	case r.need != "" && !created(st, r.need):
		return "", false, false // not there yet
	}
	running := st.Running()
	res, err := c.Command(ctx, flowID, reset)
	if err != nil {
		s.event("client: reset %s run %s to %s: %v", flowID, cur, pointText(pt), err)
		return "", false, false
	}
	if res.Duplicate {
		s.count("reset answered as a retry")
	}
	if res.RunID == "" || res.RunID == cur {
		s.fail("reset of %s run %s answered run %q", flowID, cur, res.RunID)
	}
	s.count(fmt.Sprintf("reset to %s (run %v)", pt.Kind, map[bool]string{true: "running", false: "closed"}[running]))
	if s.chance(flowID, "lose reset answer "+cur, 0, lostAnswers) {
		s.event("client: reset %s run %s to %s: run %s; the answer gets lost", flowID, cur, pointText(pt), res.RunID)
		s.count("reset answer lost")
		r.lost = res.RunID
		return "", false, false
	}
	s.event("client: reset %s run %s to %s: run %s", flowID, cur, pointText(pt), res.RunID)
	s.ackReset(flowID, resetAck{from: cur, to: res.RunID, point: pt})
	return res.RunID, true, true
}

// closedResets are the points a client of the other flow types resets
// its flow to once it completed, one time in six, never one its client continued (E37): the first S2
// (the ASYNC step), the first A (F's movement made A and B, both made
// again), the beginning (the publish is re-applied), and the Execute of
// T-1 (its timer wait counts as fired).
var closedResets = map[string]engine.ResetPoint{
	"chain": {Kind: engine.ResetStepType, StepType: "S2"},
	"fan":   {Kind: engine.ResetStepType, StepType: "A"},
	"wait":  {Kind: engine.ResetBeginning},
	"timer": {Kind: engine.ResetStepExecution, StepExecID: "T-1", BeforeExecute: true},
}

// resetClosed resets a completed flow of the other types, run run, one
// time in six (not one sideContinue continued), to its type's point in closedResets; it reports whether
// it did.
func (s *sim) resetClosed(ctx context.Context, flowID, flowType, run string) bool {
	pt, ok := closedResets[flowType]
	if v := hash(s.cfg.Seed, flowID, 100) % 12; !ok || (v != 3 && v != 4) {
		return false
	}
	_, ok = s.resetOnce(ctx, flowID, run, pt, "sim reset after close")
	return ok
}

// lostAnswers is how often (per 1000) the answer of a reset or
// continue-as-new that landed gets lost on its way to the client.
const lostAnswers = 250

// created reports whether run st's history created step execution
// need, or one of step type need.
func created(st *engine.FlowState, need string) bool {
	match := func(id string) bool { return id == need || strings.HasPrefix(id, need+"-") }
	for _, ev := range st.History {
		if ev.Type == engine.EventFlowStarted && ev.Start != nil {
			if match(ev.Start.StartStepExecID) {
				return true
			}
			if r := ev.Start.Reset; r != nil && slices.ContainsFunc(r.Steps, func(rs engine.ResetStep) bool { return match(rs.StepExecID) }) {
				return true
			}
		}
		if slices.ContainsFunc(ev.Scheduled, match) {
			return true
		}
	}
	return false
}

func pointText(pt engine.ResetPoint) string {
	return strings.TrimSpace(fmt.Sprintf("%s %s%s", pt.Kind, pt.StepType, pt.StepExecID))
}

func (s *sim) ackReset(flowID string, a resetAck) {
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	s.ledger.resets[flowID] = append(s.ledger.resets[flowID], a)
	s.ledger.acks++
}

// countClient drives a count flow after its start: set "client", then
// publish its countMsgs messages one by one (request IDs, retried until
// acknowledged: a message counted twice fails the flow), asking before
// some of them, at the seed's choice, for continue-as-new of the latest
// run (E37).
func (s *sim) countClient(ctx context.Context, flowID string, try tryFunc) bool {
	if !s.setClient(ctx, flowID, try) {
		return false
	}
	for k := range countMsgs {
		if hash(s.cfg.Seed, flowID, uint64(60+k))%4 == 0 && !s.continueOnce(ctx, flowID, fmt.Sprintf("client %d", k)) {
			return false
		}
		if !lease.Sleep(ctx, time.Duration(hash(s.cfg.Seed, flowID, uint64(80+k))%400)*time.Millisecond) {
			return false
		}
		if !s.publish(flowID, fmt.Sprintf("inc-%s-%d", flowID, k), "inc", incMessage(flowID, k), try) {
			return false
		}
		if k == countMsgs/2 && hash(s.cfg.Seed, flowID, 70)%2 == 0 && !s.restartLate(ctx, flowID, try) {
			return false
		}
	}
	return true
}

// continueOnce asks for continue-as-new of the flow's latest run, naming
// it, with reason and a request ID; false when ctx ended. A try whose
// answer got lost (the client drops one in four that landed) is sent
// again as the SDK does, with the same request ID: it must be answered
// with the run the first send made (issue 14). After a try that failed
// the client reads the run it named: it continued on this call (trigger
// CLIENT, this request ID), on another trigger first (the call then did
// nothing), or closed.
func (s *sim) continueOnce(ctx context.Context, flowID, reason string) bool {
	ct := &continueTry{s: s, flowID: flowID, reason: reason, requestID: "can-" + flowID + "-" + strings.ReplaceAll(reason, " ", "-")}
	for ctx.Err() == nil {
		p, c := s.serving()
		if c == nil || !p.gate.wait() {
			lease.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		done := ct.try(cctx, c)
		cancel()
		if done {
			return true
		}
		lease.Sleep(ctx, 100*time.Millisecond)
	}
	return false
}

// continueTry is the state of one continueOnce.
type continueTry struct {
	s                         *sim
	flowID, reason, requestID string
	run                       string // the run it names, once read
	lost                      string // the new run of an answer the client dropped
}

// try is one try of continueOnce; true when the outcome is known.
func (ct *continueTry) try(ctx context.Context, c *serving.Core) bool {
	s, flowID := ct.s, ct.flowID
	cmd := engine.ContinueAsNew{FlowID: flowID, RunID: ct.run, Reason: ct.reason, RequestID: ct.requestID}
	if ct.lost != "" {
		res, err := c.Command(ctx, flowID, cmd)
		code := engine.CodeOf(err)
		switch {
		case err == nil && res.RunID != ct.lost:
			s.fail("continue-as-new of %s run %s landed twice: runs %s and %s (its first answer got lost)", flowID, ct.run, ct.lost, res.RunID)
		case err == nil:
			s.count("continue-as-new retried after a lost answer: answered its run")
			s.ackContinue(flowID, continueAck{run: ct.run, reason: ct.reason, lost: true})
			return true
		case code == engine.CodeFailedPrecondition || code == engine.CodeNotFound || code == engine.CodeInvalidArgument:
			s.fail("continue-as-new of %s run %s (request ID %s) landed as run %s, its retry was refused: %v", flowID, ct.run, ct.requestID, ct.lost, err)
			ct.lost = ""
		default:
			return false // not serving: send it again
		}
	}
	if ct.run == "" {
		st := readRun(ctx, c, flowID, "")
		if st == nil {
			return false
		}
		if !st.Running() {
			if s.flowType(flowID) == "count" {
				s.fail("count flow %s run %s is %s before its client published every message", flowID, st.RunID, st.Status)
			}
			s.count("continue-as-new skipped: the flow closed")
			return true
		}
		ct.run = st.RunID
		cmd.RunID = st.RunID
	} else if st := readRun(ctx, c, flowID, ct.run); st == nil {
		return false
	} else if !st.Running() {
		switch {
		case continuedBy(st, ct.reason):
			if st.ContinuedByRequest(ct.requestID) != st.ContinuedRunID() {
				s.fail("run %s of %s continued as run %s on the client's call, not with its request ID %s", ct.run, flowID, st.ContinuedRunID(), ct.requestID)
			}
			s.count("continue-as-new landed, its answer lost")
			s.ackContinue(flowID, continueAck{run: ct.run, reason: ct.reason, lost: true})
		case st.Status == engine.StatusContinuedAsNew:
			s.count("continue-as-new of the client after another trigger's")
		default:
			s.count("continue-as-new skipped: the flow closed")
		}
		return true
	}
	res, err := c.Command(ctx, flowID, cmd)
	if err != nil {
		return false
	}
	if res.RunID == "" || res.RunID == ct.run {
		s.fail("continue-as-new of %s run %s answered run %q", flowID, ct.run, res.RunID)
	}
	s.count("continue-as-new by the client")
	if s.chance(flowID, "lose continue answer "+ct.reason, 0, lostAnswers) {
		s.count("continue-as-new answer lost")
		ct.lost = res.RunID
		return false
	}
	s.ackContinue(flowID, continueAck{run: ct.run, reason: ct.reason})
	return true
}

// flowType is the type of a started flow.
func (s *sim) flowType(flowID string) string {
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	return s.ledger.started[flowID]
}

// restartLate sends the flow's StartFlow again, with its request ID, as a
// retry that arrives after a reset or continuation (E37): the start's
// request ID stays the flow's, so it is recognised (AlreadyStarted) and
// starts no run.
func (s *sim) restartLate(ctx context.Context, flowID string, try tryFunc) bool {
	flowType := s.flowType(flowID)
	return try("start again", func(ctx context.Context, c *serving.Core) error {
		res, err := c.StartFlow(ctx, engine.StartFlow{FlowID: flowID, FlowType: flowType, RequestID: "start-" + flowID,
			StartStep: startStep[flowType], Input: startInput(flowType, flowID)})
		if err == nil {
			if !res.AlreadyStarted {
				s.fail("StartFlow of %s retried with its request ID after a reset or continuation started run %s", flowID, res.RunID)
			}
			s.count("start retried late: recognised")
		}
		return err
	})
}

// sideContinue asks, with probability one in four, for continue-as-new of
// a flow of the other types while it runs (E37), after up to 600 ms (2.5
// s for the timer and stop flows, which run longer): its steps, waits,
// durable timer, messages and attributes go to the new run.
func (s *sim) sideContinue(ctx context.Context, flowID string) {
	if hash(s.cfg.Seed, flowID, 100)%12 >= 3 {
		return
	}
	within := uint64(600)
	if t := s.flowType(flowID); t == "timer" || t == "stop" {
		within = 2500
	}
	if lease.Sleep(ctx, time.Duration(hash(s.cfg.Seed, flowID, 101)%within)*time.Millisecond) {
		s.continueOnce(ctx, flowID, "client side")
	}
}

// continuedBy reports whether run st continued as new on a client's call
// with reason.
func continuedBy(st *engine.FlowState, reason string) bool {
	return st.Opts != nil && st.Opts.Continued != nil && st.Opts.Continued.Trigger == engine.ContinueClient &&
		st.Close != nil && strings.HasSuffix(st.Close.Message, ": "+reason)
}

func (s *sim) ackContinue(flowID string, a continueAck) {
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	s.ledger.continues[flowID] = append(s.ledger.continues[flowID], a)
	s.ledger.acks++
}
