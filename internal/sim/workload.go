package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
)

// The workload: three flow types whose outcome is known in advance.
//
//	chain  S1 -> S2 -> S3, S3 completes with the flow ID
//	fan    F moves to A and B at once; each completes with "A:"/"B:" + ID
//	wait   W waits (WaitFor) for one message on channel "go", which the
//	       client publishes; Execute completes with the message
//	timer  T waits (WaitFor) for a durable timer of timerWait, staging
//	       attribute "wf"; Execute completes with "T:" + ID, staging
//	       attribute "ex"; the client sets attribute "client" (unless
//	       the flow completed first)
//	stop   H waits for a message on channel "never" that nobody sends;
//	       the client calls RPC "ping" (answered "pong:" + ID, staging
//	       attribute "rpc"), then cancels or terminates the flow
//	       (StopFlow)
//	reset  R1 waits (WaitFor) for one message on channel "go", then
//	       R1 -> R2 -> R3, R3 completes with "R:" + ID; the client sets
//	       attribute "client", publishes, then resets the flow once or
//	       twice (E37: to the beginning, before the first R2 or before
//	       R3-1, while it runs or after it closed; lifecycle.go)
//	count  C waits for one message on channel "inc" and moves to C
//	       again with its input plus one, until it took countMsgs
//	       messages ("inc:<ID>:<n>", in order: a message lost or taken
//	       twice fails the flow), then completes with "count:<ID>:<n>";
//	       the client sets attribute "client", publishes the messages
//	       and asks for continue-as-new between them; some decisions ask
//	       for it too, and the sim's low limits.continueAsNewHistoryEvents
//	       continues a run at ten events (E37; lifecycle.go)
//
// Steps without a WaitFor that get a WaitFor task (a flow started before
// any worker declared its type) are answered "no wait", as the SDK does.
// S2, A and B are ASYNC (their attempt's start is logged after it is
// sent, T3), the others SYNC.
var flowDefs = []*engine.FlowDefinition{
	{Type: "chain", Start: "S1", Steps: map[string]engine.StepDef{"S1": {}, "S2": asyncStep, "S3": {}}},
	{Type: "fan", Start: "F", Steps: map[string]engine.StepDef{"F": {}, "A": asyncStep, "B": asyncStep}},
	{Type: "wait", Start: "W", Steps: map[string]engine.StepDef{"W": {HasWaitFor: true}}, Channels: []string{"go"}},
	{Type: "timer", Start: "T", Steps: map[string]engine.StepDef{"T": {HasWaitFor: true}}, Attributes: []string{"client", "wf", "ex"}},
	{Type: "stop", Start: "H", Steps: map[string]engine.StepDef{"H": {HasWaitFor: true}}, Channels: []string{"never"},
		RPCs: []string{"ping"}, Attributes: []string{"rpc"}},
	{Type: "reset", Start: "R1", Steps: map[string]engine.StepDef{"R1": {HasWaitFor: true}, "R2": asyncStep, "R3": {}},
		Channels: []string{"go"}, Attributes: []string{"client"}},
	{Type: "count", Start: "C", Steps: map[string]engine.StepDef{"C": {HasWaitFor: true}}, Channels: []string{"inc"},
		Attributes: []string{"client"}},
}

// timerWait is the timer T waits for.
const timerWait = 2 * time.Second

var asyncStep = engine.StepDef{Options: &engine.StepOptions{Execute: &engine.MethodOptions{Durability: engine.ASYNC}}}

var startStep = map[string]string{"chain": "S1", "fan": "F", "wait": "W", "timer": "T", "stop": "H", "reset": "R1", "count": "C"}

// flowTypes are the workload's flow types, in the order flows are dealt.
var flowTypes = []string{"chain", "fan", "wait", "timer", "stop", "reset", "count"}

// startInput is the input a flow starts with: its ID, a count flow's 0.
func startInput(flowType, flowID string) engine.Value {
	if flowType == "count" {
		return str("0")
	}
	return str(flowID)
}

// wantCounters is how many step executions of each type a flow of the
// type has in the end: one each; a second one means a result committed
// twice.
var wantCounters = map[string]map[string]int{
	"chain": {"S1": 1, "S2": 1, "S3": 1},
	"fan":   {"F": 1, "A": 1, "B": 1},
	"wait":  {"W": 1},
	"timer": {"T": 1},
	"stop":  {"H": 1},
	// The latest run of a reset flow, whatever its point: the counters
	// at the point, then one execution each.
	"reset": {"R1": 1, "R2": 1, "R3": 1},
	// Carried over every continuation: C-1 ... C-countMsgs.
	"count": {"C": countMsgs},
}

func str(s string) engine.Value {
	return engine.Value{Type: "json:string", Data: []byte(strconv.Quote(s))}
}

// published is the message a wait flow's client publishes.
func published(flowID string) engine.Value { return str("msg:" + flowID) }

// wantOutputs is the outputs a completed flow must have, by step type.
func wantOutputs(flowType, flowID string) map[string]engine.Value {
	switch flowType {
	case "chain":
		return map[string]engine.Value{"S3": str(flowID)}
	case "fan":
		return map[string]engine.Value{"A": str("A:" + flowID), "B": str("B:" + flowID)}
	case "timer":
		return map[string]engine.Value{"T": str("T:" + flowID)}
	case "stop":
		return map[string]engine.Value{}
	case "reset":
		return map[string]engine.Value{"R3": str("R:" + flowID)}
	case "count":
		return map[string]engine.Value{"C": str(fmt.Sprintf("count:%s:%d", flowID, countMsgs))}
	default:
		return map[string]engine.Value{"W": published(flowID)}
	}
}

// decide is the worker's code: the Execute decision of a step.
func decide(t *engine.Task) engine.Decision {
	complete := func(v engine.Value) engine.Decision {
		return engine.Decision{Kind: engine.DecideGracefulComplete, Output: v}
	}
	move := func(steps ...string) engine.Decision {
		d := engine.Decision{Kind: engine.DecideMovements}
		for _, s := range steps {
			d.Movements = append(d.Movements, engine.Movement{StepType: s, Input: t.Input})
		}
		return d
	}
	switch t.StepType {
	case "S1":
		return move("S2")
	case "S2":
		return move("S3")
	case "S3":
		return complete(str(t.FlowID))
	case "F":
		return move("A", "B")
	case "A", "B":
		return complete(str(t.StepType + ":" + t.FlowID))
	case "T":
		if t.Results != nil && len(t.Results.Conditions) == 1 && t.Results.Conditions[0].Kind == engine.CondTimer && t.Results.Conditions[0].Satisfied {
			return complete(str("T:" + t.FlowID))
		}
		return engine.Decision{Kind: engine.DecideForceFail, Reason: "T ran before its timer fired"}
	case "W":
		if t.Results != nil && len(t.Results.Conditions) == 1 && len(t.Results.Conditions[0].Messages) == 1 {
			return complete(t.Results.Conditions[0].Messages[0].Value)
		}
		return engine.Decision{Kind: engine.DecideForceFail, Reason: "W ran without its message"}
	case "R1":
		if m, ok := message(t); ok && m.Type == published(t.FlowID).Type && bytes.Equal(m.Data, published(t.FlowID).Data) {
			return move("R2")
		}
		return engine.Decision{Kind: engine.DecideForceFail, Reason: "R1 ran without its message"}
	case "R2":
		return move("R3")
	case "R3":
		return complete(str("R:" + t.FlowID))
	case "C":
		return count(t)
	}
	return engine.Decision{Kind: engine.DecideForceFail, Reason: "unknown step " + t.StepType}
}

// ledger records what the clients and workers were told: every
// acknowledged change must be in the final state.
type ledger struct {
	mu        sync.Mutex
	started   map[string]string // flow ID -> flow type, start acknowledged
	published map[string]bool   // flow ID -> publish acknowledged
	// results are the Execute results the node accepted: flow ID ->
	// the run their token names -> step execution ID -> the decision.
	results map[string]map[string]map[string]engine.Decision
	// firstRun is the run the acknowledged start answered, by flow ID.
	firstRun map[string]string
	// resets are the resets the node acknowledged or that a read found
	// landed after their answer got lost, by flow ID, in order;
	// continues the client's continue-as-new calls likewise (E37).
	resets    map[string][]resetAck
	continues map[string][]continueAck
	// waited is the run the client's last WaitForFlow answered (it
	// follows resets and continuations to the latest run).
	waited map[string]string
	acks   int
	// done: the client saw the flow end.
	done map[string]bool
	// attrs are the acknowledged attribute writes (the client's, and
	// those staged with an accepted result): flow ID -> name -> value.
	// Each name has one writer, so the final state must hold the value.
	attrs map[string]map[string]engine.Value
	// stopped: the flow's StopFlow was acknowledged, with its kind.
	stopped map[string]stopAck
	// timerSent: when the accepted WaitFor result of a timer flow was
	// sent; its timer cannot fire before timerWait after that.
	timerSent map[string]time.Time
}

type stopAck struct {
	kind engine.StopKind
	at   time.Time
}

func (l *ledger) attr(flowID, name string, v engine.Value) {
	if l.attrs[flowID] == nil {
		l.attrs[flowID] = map[string]engine.Value{}
	}
	l.attrs[flowID][name] = v
	l.acks++
}

func newLedger() *ledger {
	return &ledger{started: map[string]string{}, published: map[string]bool{},
		results: map[string]map[string]map[string]engine.Decision{}, done: map[string]bool{},
		attrs: map[string]map[string]engine.Value{}, stopped: map[string]stopAck{},
		timerSent: map[string]time.Time{}, firstRun: map[string]string{},
		resets: map[string][]resetAck{}, continues: map[string][]continueAck{}, waited: map[string]string{}}
}

// tryFunc calls fn on whichever process serves until it succeeds (each
// call a new try, so one whose answer got lost may have landed); false
// when ctx ended first.
type tryFunc func(what string, fn func(ctx context.Context, c *serving.Core) error) bool

// tries returns the client's tryFunc.
func (s *sim) tries(ctx context.Context) tryFunc {
	return func(what string, fn func(ctx context.Context, c *serving.Core) error) bool {
		for ctx.Err() == nil {
			p, c := s.serving()
			if c == nil {
				if !lease.Sleep(ctx, 100*time.Millisecond) {
					return false
				}
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := errKilled
			if p.gate.wait() {
				err = fn(cctx, c)
			}
			cancel()
			if err == nil {
				return true
			}
			if !lease.Sleep(ctx, 100*time.Millisecond) {
				return false
			}
		}
		return false
	}
}

// client drives one flow: start it (retrying with the same request ID
// until acknowledged), publish its message if it waits for one, and wait
// until it completes. It stops when ctx ends.
func (s *sim) client(ctx context.Context, flowID, flowType string) {
	try := s.tries(ctx)
	req := "start-" + flowID
	called := time.Now()
	var first string
	if !try("start", func(ctx context.Context, c *serving.Core) error {
		res, err := c.StartFlow(ctx, engine.StartFlow{FlowID: flowID, FlowType: flowType, RequestID: req,
			StartStep: startStep[flowType], Input: startInput(flowType, flowID)})
		first = res.RunID
		return err
	}) {
		return
	}
	s.hist.add(flowID, histOp{kind: opStart}, called, time.Now())
	s.ledger.mu.Lock()
	s.ledger.started[flowID] = flowType
	s.ledger.firstRun[flowID] = first
	s.ledger.acks++
	s.ledger.mu.Unlock()
	// Reads of the flow's state while it runs, at moments of the seed's,
	// and one right after each acknowledgement: the history checker's.
	s.read(ctx, flowID)
	var reads sync.WaitGroup
	defer reads.Wait()
	readCtx, stopReads := context.WithCancel(ctx)
	defer stopReads()
	reads.Go(func() {
		for i := uint64(0); lease.Sleep(readCtx, time.Duration(1000+hash(s.cfg.Seed, flowID+"/read", i)%4000)*time.Millisecond); i++ {
			s.read(readCtx, flowID)
		}
	})
	if flowType != "reset" && flowType != "count" {
		// A quarter of the flows of the other types continue as new once while
		// they run, on their client's call (E37, lifecycle.go).
		var side sync.WaitGroup
		defer side.Wait()
		side.Go(func() { s.sideContinue(ctx, flowID) })
	}
	if flowType == "wait" {
		if !try("publish", func(ctx context.Context, c *serving.Core) error {
			_, err := c.Command(ctx, flowID, engine.PublishToChannel{FlowID: flowID, RequestID: "pub-" + flowID,
				Messages: []engine.Publish{{Channel: "go", Value: published(flowID)}}})
			return err
		}) {
			return
		}
		s.ledger.mu.Lock()
		s.ledger.published[flowID] = true
		s.ledger.acks++
		s.ledger.mu.Unlock()
	}
	if flowType == "timer" {
		// The write races the flow's timer: a try that finds the run
		// closed (its timer fired while earlier tries failed) ends the
		// attempts, unacknowledged (a write whose answer got lost may
		// still have landed: the check only holds acknowledged ones).
		v := str("c:" + flowID)
		acked := false
		called := time.Now()
		ok := try("set attribute", func(ctx context.Context, c *serving.Core) error {
			_, err := c.Command(ctx, flowID, engine.SetAttributes{FlowID: flowID,
				Attributes: []engine.AttributeWrite{{Name: "client", Value: v}}})
			if err == nil {
				acked = true
				return nil
			}
			// The flow completes on its own after timerWait: a call
			// that store faults or a failover held up past its end is
			// refused, every retry too. The client gives up on the
			// attribute (nothing acknowledged, nothing to check) and
			// waits for the flow.
			if st, ferr := c.Flow(ctx, flowID, ""); ferr == nil && st != nil && st.Status != engine.StatusRunning {
				return nil
			}
			return err
		})
		if !acked {
			s.hist.unsureClient(flowID)
		}
		if !ok {
			return
		}
		if acked {
			s.hist.add(flowID, histOp{kind: opSetClient}, called, time.Now())
			s.ledger.mu.Lock()
			s.ledger.attr(flowID, "client", v)
			s.ledger.mu.Unlock()
			s.read(ctx, flowID)
		}
	}
	if flowType == "stop" {
		// Each try is a new call: one whose answer got lost may commit
		// too, with the same output and attribute.
		if !try("rpc", func(ctx context.Context, c *serving.Core) error {
			res, err := c.InvokeRPC(ctx, engine.InvokeRPC{FlowID: flowID, Name: "ping", Input: str("rpc:" + flowID)}, 3*time.Second)
			if err != nil {
				return err
			}
			if want := str("pong:" + flowID); res.Output.Type != want.Type || !bytes.Equal(res.Output.Data, want.Data) {
				s.fail("RPC ping of %s answered %s %s, want %s", flowID, res.Output.Type, res.Output.Data, want.Data)
			}
			s.count("rpc answered")
			s.ledger.mu.Lock()
			s.ledger.attr(flowID, "rpc", str("r:"+flowID))
			s.ledger.mu.Unlock()
			return nil
		}) {
			return
		}
		kind := engine.StopCancel
		if hash(s.cfg.Seed, flowID, 2)%2 == 1 {
			kind = engine.StopTerminate
		}
		if !lease.Sleep(ctx, time.Duration(hash(s.cfg.Seed, flowID, 3)%3000)*time.Millisecond) {
			return
		}
		// A retry after a reply that got lost finds the run closed: the
		// flow's status then says whether the stop landed.
		if !try("stop", func(ctx context.Context, c *serving.Core) error {
			_, err := c.Command(ctx, flowID, engine.StopFlow{FlowID: flowID, Kind: kind, Reason: "sim"})
			if err == nil {
				s.ledger.mu.Lock()
				s.ledger.stopped[flowID] = stopAck{kind: kind, at: time.Now()}
				s.ledger.acks++
				s.ledger.mu.Unlock()
				return nil
			}
			if st, ferr := c.Flow(ctx, flowID, ""); ferr == nil && st != nil && st.Status != engine.StatusRunning {
				return nil
			}
			return err
		}) {
			return
		}
	}
	switch flowType {
	case "reset":
		if !s.resetClient(ctx, flowID, first, try) {
			return
		}
	case "count":
		if !s.countClient(ctx, flowID, try) {
			return
		}
	}
	// The end: WaitForFlow follows resets and continuations (E37), so the
	// run it answers has no successor.
	waitEnd := func() (waited string, ok bool) {
		ok = try("wait", func(ctx context.Context, c *serving.Core) error {
			st, err := c.WaitForFlow(ctx, flowID, "")
			if err != nil {
				return err
			}
			if st.Status == engine.StatusRunning {
				return errors.New("still running")
			}
			if !c.Serving() {
				return server.ErrNotServing // as the FlowService answers (L15)
			}
			if next := st.NextRunID(); next != "" || st.Status == engine.StatusContinuedAsNew {
				s.fail("WaitForFlow(%s) answered run %s (%s), which run %s follows", flowID, st.RunID, st.Status, next)
			}
			waited = st.RunID
			return nil
		})
		return waited, ok
	}
	waited, ok := waitEnd()
	if !ok {
		return
	}
	if s.resetClosed(ctx, flowID, flowType, waited) {
		if waited, ok = waitEnd(); !ok {
			return
		}
	}
	s.ledger.mu.Lock()
	s.ledger.done[flowID] = true
	s.ledger.waited[flowID] = waited
	s.ledger.mu.Unlock()
	s.read(ctx, flowID)
}

// worker is a simulated worker: it opens a session on the serving
// process, runs each task it takes and sends the result. Like the SDK, it
// keeps the results whose outcome it does not know (the call failed, or
// the session ended first) and sends them again on its next session,
// where a new epoch answers STALE_EPOCH. With the schedule's
// probabilities it sends a result twice, and drops its session with tasks
// in hand (a disconnect).
type worker struct {
	s    *sim
	name string

	mu      sync.Mutex
	pending []engine.Command
}

// maxConcurrent is each worker session's slot count: small, so that the
// dispatcher's slot accounting matters.
const maxConcurrent = 2

// wsession is one session of a worker.
type wsession struct {
	sess server.Session
	p    *proc
	// running counts the tasks of this session that have not had their
	// result answered; closed: the worker dropped the session.
	mu      sync.Mutex
	running int
	closed  bool
}

func (s *sim) worker(ctx context.Context, name string) {
	w := &worker{s: s, name: name}
	hello := server.WorkerHello{WorkerID: name, MaxConcurrent: maxConcurrent}
	for _, d := range flowDefs {
		hello.FlowTypes = append(hello.FlowTypes, server.FlowTypeDecl{Definition: d})
	}
	var tasks sync.WaitGroup
	defer tasks.Wait()
	for ctx.Err() == nil {
		p, c := s.serving()
		if c == nil || !p.gate.wait() {
			if !lease.Sleep(ctx, 100*time.Millisecond) {
				return
			}
			continue
		}
		sess, err := c.OpenSession(ctx, hello)
		if err != nil {
			if !lease.Sleep(ctx, 100*time.Millisecond) {
				return
			}
			continue
		}
		ws := &wsession{sess: sess, p: p}
		w.mu.Lock()
		resend := w.pending
		w.pending = nil
		w.mu.Unlock()
		tasks.Add(1)
		go func() {
			defer tasks.Done()
			// The SDK resends once the stream is up; the tasks of the new
			// session may come first.
			if !lease.Sleep(ctx, time.Duration(hash(s.cfg.Seed, name, uint64(len(resend)))%300)*time.Millisecond) {
				return
			}
			for _, cmd := range resend {
				w.send(ctx, ws, cmd, false)
			}
		}()
		w.session(ctx, ws, &tasks)
		ws.mu.Lock()
		ws.closed = true
		ws.mu.Unlock()
		sess.Close()
	}
}

// session runs one worker session until it ends, the process stops
// serving, or the worker disconnects.
func (w *worker) session(ctx context.Context, ws *wsession, tasks *sync.WaitGroup) {
	s, sess, p := w.s, ws.sess, ws.p
	hb := time.NewTicker(time.Second)
	defer hb.Stop()
	var mu sync.Mutex
	running := map[engine.Token]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			return
		case <-hb.C:
			if !p.gate.wait() {
				return
			}
			mu.Lock()
			toks := make([]engine.Token, 0, len(running))
			for t := range running {
				toks = append(toks, t)
			}
			mu.Unlock()
			sess.Heartbeat(toks, nil)
			continue
		case <-sess.Notify():
		}
		if !p.gate.wait() {
			return
		}
		for _, m := range sess.Take() {
			if m.Task == nil {
				continue
			}
			t := m.Task
			n := s.taskCount(t)
			ws.mu.Lock()
			ws.running++
			over := ws.running > maxConcurrent
			ws.mu.Unlock()
			if over {
				// A result answered just now may not have been counted
				// yet: look again once every goroutine of this instant ran.
				tasks.Add(1)
				go func() {
					defer tasks.Done()
					lease.Sleep(ctx, time.Millisecond)
					ws.mu.Lock()
					n := ws.running
					ws.mu.Unlock()
					if n > maxConcurrent {
						s.fail("%s holds %d tasks of one session on p%d, more than its %d slots (the last %s/%s attempt %d, epoch %d)",
							w.name, n, p.id, maxConcurrent, t.FlowID, t.StepExecID, t.Attempt, t.Token.Epoch)
					}
				}()
			}
			if s.chance(w.name, "disconnect", n, s.plan.disconnectRate) {
				s.event("%s: disconnects from p%d with %s/%s in hand", w.name, p.id, t.FlowID, t.StepExecID)
				return
			}
			mu.Lock()
			running[t.Token] = true
			mu.Unlock()
			tasks.Add(1)
			go func() {
				defer tasks.Done()
				defer func() { mu.Lock(); delete(running, t.Token); mu.Unlock() }()
				w.runTask(ctx, ws, t, n)
			}()
		}
	}
}

// runTask runs one task and sends its result, maybe twice.
func (w *worker) runTask(ctx context.Context, ws *wsession, t *engine.Task, n uint64) {
	// The task holds its slot until its result is answered; the node
	// frees the slot then, so a duplicate sent after that holds none (an
	// RPC result sent again waits for the first commit to be durable).
	release := sync.OnceFunc(func() {
		ws.mu.Lock()
		ws.running--
		ws.mu.Unlock()
	})
	defer release()
	if !lease.Sleep(ctx, 50*time.Millisecond+time.Duration(n%7)*20*time.Millisecond) {
		return
	}
	var cmd engine.Command
	switch t.Token.Method {
	case engine.MethodRPC:
		cmd = engine.RPCResult{Token: t.Token, Output: str("pong:" + t.FlowID),
			Staged: engine.Staged{Attributes: []engine.AttributeWrite{{Name: "rpc", Value: str("r:" + t.FlowID)}}}}
	case engine.MethodWaitFor:
		if !hasWaitFor(t.FlowType, t.StepType) {
			// Legitimate only for an attempt handed out before the run got
			// its definition (engine doc, E4); -showif "without WaitFor".
			w.s.count("WaitFor task of a step without WaitFor")
			w.s.event("%s: WaitFor task %s/%s attempt %d (epoch %d) of a step without WaitFor", w.name, t.FlowID, t.StepExecID, t.Attempt, t.Token.Epoch)
		}
		cmd = waitFor(t)
	default:
		if t.StepType == "T" {
			w.checkTimer(t)
		}
		er := engine.ExecuteResult{Token: t.Token, Decision: decide(t)}
		if t.StepType == "T" {
			er.Staged.Attributes = []engine.AttributeWrite{{Name: "ex", Value: str("ex:" + t.FlowID)}}
		}
		cmd = er
	}
	if !w.send(ctx, ws, cmd, true) {
		return
	}
	release()
	if w.s.chance(w.name, "duplicate", n, w.s.plan.duplicateRate) {
		w.send(ctx, ws, cmd, false)
	}
}

func hasWaitFor(flowType, stepType string) bool {
	for _, d := range flowDefs {
		if d.Type == flowType {
			return d.Steps[stepType].HasWaitFor
		}
	}
	return false
}

// waitFor is the worker's WaitFor code.
func waitFor(t *engine.Task) engine.WaitForResult {
	channel := func(ch string) *engine.Wait {
		return &engine.Wait{Mode: engine.Until,
			Conditions: []engine.Condition{{Channel: &engine.ChannelCondition{Channel: ch, Bound: engine.ForOne}}}}
	}
	r := engine.WaitForResult{Token: t.Token}
	switch t.StepType {
	case "W":
		r.Wait = channel("go")
	case "H":
		r.Wait = channel("never")
	case "R1":
		r.Wait = channel("go")
	case "C":
		r.Wait = channel("inc")
	case "T":
		d := timerWait
		r.Wait = &engine.Wait{Mode: engine.Until, Conditions: []engine.Condition{{Timer: &d}}}
		r.Staged.Attributes = []engine.AttributeWrite{{Name: "wf", Value: str("wf:" + t.FlowID)}}
	}
	return r
}

// checkTimer checks T's Execute task: its timer fired, not before its
// fire time, which is timerWait after the accepted WaitFor result was
// stored (so after it was sent).
func (w *worker) checkTimer(t *engine.Task) {
	now := time.Now()
	if t.Results == nil || len(t.Results.Conditions) != 1 || !t.Results.Conditions[0].Satisfied {
		w.s.fail("%s/%s: Execute task of T without a fired timer: %+v", t.FlowID, t.StepExecID, t.Results)
		return
	}
	at := t.Results.Conditions[0].FireAt
	if now.Before(at) {
		w.s.fail("%s/%s: Execute task of T at %v, before its timer's fire time %v", t.FlowID, t.StepExecID, now.Sub(w.s.start), at.Sub(w.s.start))
	}
	l := w.s.ledger
	l.mu.Lock()
	sent, ok := l.timerSent[t.FlowID]
	l.mu.Unlock()
	if ok && at.Before(sent.Add(timerWait)) {
		w.s.fail("%s/%s: timer fires at %v, less than %v after its WaitFor result was sent at %v",
			t.FlowID, t.StepExecID, at.Sub(w.s.start), timerWait, sent.Sub(w.s.start))
	}
}

// token returns a result's token.
func token(cmd engine.Command) engine.Token {
	switch c := cmd.(type) {
	case engine.WaitForResult:
		return c.Token
	case engine.ExecuteResult:
		return c.Token
	case engine.RPCResult:
		return c.Token
	}
	panic(fmt.Sprintf("sim: no token in %T", cmd))
}

// send sends one result on ws and records an acceptance. A result whose
// outcome is unknown (the call failed, the session is gone) is kept for
// the next session when keep is set. It reports whether the result was
// answered.
func (w *worker) send(ctx context.Context, ws *wsession, cmd engine.Command, keep bool) bool {
	tok := token(cmd)
	ws.mu.Lock()
	closed := ws.closed
	ws.mu.Unlock()
	var ack server.Ack
	err := errKilled
	if wf, ok := cmd.(engine.WaitForResult); ok && wf.Wait != nil && len(wf.Wait.Conditions) == 1 && wf.Wait.Conditions[0].Timer != nil {
		// Whichever of the flow's WaitFor results is stored, it was sent
		// no earlier than the first.
		l := w.s.ledger
		l.mu.Lock()
		if _, ok := l.timerSent[tok.FlowID]; !ok {
			l.timerSent[tok.FlowID] = time.Now()
		}
		l.mu.Unlock()
	}
	if !closed && ws.p.gate.wait() {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ack, err = ws.sess.Result(rctx, tok, cmd)
		cancel()
	}
	if err != nil {
		if keep && ctx.Err() == nil {
			w.mu.Lock()
			w.pending = append(w.pending, cmd)
			w.mu.Unlock()
		}
		return false
	}
	w.s.count(fmt.Sprintf("result ack %d", ack.Status))
	if ack.Status == server.AckInvalid {
		w.s.event("%s: result of %s/%s %s attempt %d (epoch %d) on p%d is INVALID: %s",
			w.name, tok.FlowID, tok.StepExecID, tok.Method, tok.Attempt, tok.Epoch, ws.p.id, ack.Message)
	}
	if !keep {
		w.s.count("result sent again")
		w.s.event("%s: sent the result of %s/%s (epoch %d) again on p%d: ack %d", w.name, tok.FlowID, tok.StepExecID, tok.Epoch, ws.p.id, ack.Status)
	}
	if ack.Status == server.AckAccepted {
		l := w.s.ledger
		l.mu.Lock()
		var staged engine.Staged
		switch c := cmd.(type) {
		case engine.ExecuteResult:
			if l.results[tok.FlowID] == nil {
				l.results[tok.FlowID] = map[string]map[string]engine.Decision{}
			}
			if l.results[tok.FlowID][tok.RunID] == nil {
				l.results[tok.FlowID][tok.RunID] = map[string]engine.Decision{}
			}
			l.results[tok.FlowID][tok.RunID][tok.StepExecID] = c.Decision
			l.acks++
			staged = c.Staged
		case engine.WaitForResult:
			staged = c.Staged
		case engine.RPCResult:
			staged = c.Staged
		}
		for _, a := range staged.Attributes {
			l.attr(tok.FlowID, a.Name, a.Value)
		}
		l.mu.Unlock()
	}
	return true
}

// taskCount numbers the tasks of one step attempt the workers saw, so that
// the worker's random choices depend on the task, not on goroutine order.
func (s *sim) taskCount(t *engine.Task) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s/%s/%s/%d/%d", t.FlowID, t.StepExecID, t.Token.Method, t.Attempt, t.Token.Epoch)
	s.seen[k]++
	return hash(s.cfg.Seed, k, s.seen[k])
}
