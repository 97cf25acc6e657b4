package serving

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// session is one worker stream registered with the dispatcher.
type session struct {
	c        *Core
	id       string
	workerID string
	types    map[string]bool
	max      int

	// inflight maps the session's reserved and running tasks to the time
	// their slot expires; guarded by the dispatcher's mutex.
	inflight map[taskKey]time.Time
	closed   bool // guarded by the dispatcher's mutex

	mu       sync.Mutex
	out      []server.Outgoing
	beats    map[taskKey]time.Duration // heartbeat timeouts of tasks sent (heartbeat.go)
	lastBeat map[taskKey]time.Time     // when each of them last heartbeat
	// timerRun is, for a task a continue-as-new carried (E37), the run
	// its HEARTBEAT timer is armed under, which its token does not name.
	timerRun map[taskKey]string
	notify   chan struct{}
	done     chan struct{}
	once     sync.Once
}

var _ server.Session = (*session)(nil)

// OpenSession implements server.Backend: it registers the worker's flow
// types (the latest declaration wins), sets the definition of running flows
// that were started without one, and adds the session to the dispatcher.
func (c *Core) OpenSession(_ context.Context, h server.WorkerHello) (server.Session, error) {
	if !c.Serving() {
		return nil, server.ErrNotServing
	}
	s := &session{
		c: c, id: fmt.Sprintf("%d-%s", c.cfg.Epoch, strconv.FormatUint(c.rpcSeq.Add(1), 10)), workerID: h.WorkerID,
		types: map[string]bool{}, max: max(h.MaxConcurrent, 1), inflight: map[taskKey]time.Time{},
		notify: make(chan struct{}, 1), done: make(chan struct{}),
	}
	for _, ft := range h.FlowTypes {
		s.types[ft.Definition.Type] = true
	}
	if err := c.register(h.FlowTypes); err != nil {
		return nil, err
	}
	if err := c.disp.add(s); err != nil {
		return nil, err
	}
	c.log.Info("worker connected", "workerId", h.WorkerID, "sessionId", s.id, "flowTypes", len(h.FlowTypes),
		"maxConcurrentTasks", s.max, "sdk", h.SDKVersion)
	return s, nil
}

func (s *session) Welcome() server.Welcome {
	return server.Welcome{NodeID: s.c.cfg.NodeID, Epoch: s.c.cfg.Epoch, SessionID: s.id,
		HeartbeatInterval: s.c.cfg.HeartbeatInterval, PingInterval: s.c.cfg.PingInterval}
}

func (s *session) push(m server.Outgoing) {
	s.mu.Lock()
	s.heartbeatNoted(m.Task)
	s.out = append(s.out, m)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *session) Notify() <-chan struct{} { return s.notify }

// Untake implements server.Session. The tasks come back with the bytes
// Take loaded for them; they wait again with references only, as every
// queued task does (Take loads the bytes again).
func (s *session) Untake(msgs []server.Outgoing) {
	back := slices.Clone(msgs)
	if s.c.cfg.Values != nil {
		for i, m := range back {
			if m.Task != nil {
				t := withoutValueBytes(*m.Task)
				back[i].Task = &t
			}
		}
	}
	s.mu.Lock()
	s.out = append(back, s.out...)
	s.mu.Unlock()
}

// Take implements server.Session: the tasks carry the bytes of their value
// objects (resolveTasks).
func (s *session) Take() []server.Outgoing { return s.resolveTasks(s.take()) }

// take returns and removes the queued messages as they are.
func (s *session) take() []server.Outgoing {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.out
	s.out = nil
	return out
}

func (s *session) Done() <-chan struct{} { return s.done }

// end ends the session from the server's side.
func (s *session) end() {
	s.once.Do(func() { close(s.done) })
}

// Close implements server.Session. The stream has stopped taking
// messages: the tasks still in the outbox never went out, and go to the
// next free slot (the worker reconnected, or another one).
func (s *session) Close() {
	s.c.disp.mu.Lock()
	s.closed = true // no task is pushed to s from now on
	s.c.disp.mu.Unlock()
	unsent := s.take()
	s.c.disp.remove(s)
	s.c.disp.resend(unsent)
	s.end()
	s.c.log.Info("worker disconnected", "workerId", s.workerID, "sessionId", s.id)
}

// Heartbeat implements server.Session: it extends the slots of the tasks
// the worker still runs, moves their heartbeat timers and records their
// details (heartbeat.go).
func (s *session) Heartbeat(running []engine.Token, details []server.TaskDetails) {
	d := s.c.disp
	now := time.Now()
	d.mu.Lock()
	for _, t := range running {
		k := tokKey(t)
		if dl, ok := s.inflight[k]; ok && dl.Before(now.Add(reserveGrace)) {
			s.inflight[k] = now.Add(reserveGrace)
		}
	}
	d.mu.Unlock()
	s.beat(running, details, now)
}

// Result implements server.Session (W2).
func (s *session) Result(ctx context.Context, tok engine.Token, cmd engine.Command) (server.Ack, error) {
	c := s.c
	// The slot is freed once the outcome is known, so that a drain waits
	// for running attempts' results to commit (A3, K2). A result of an
	// earlier epoch frees nothing: its key carries its epoch, and the
	// attempt this epoch handed out again under the same number (T3)
	// keeps its slot and is still sent.
	defer c.disp.finished(s, tokKey(tok))
	if tok.Epoch != c.cfg.Epoch {
		return server.Ack{Status: server.AckStaleEpoch,
			Message: fmt.Sprintf("the task was handed out in epoch %d; this process serves epoch %d", tok.Epoch, c.cfg.Epoch)}, nil
	}
	// The objects of a result are written whatever becomes of the stream
	// (its worker resends the result only after a reconnect): a result
	// whose write outlived its caller still commits, and a store that
	// takes no write ends the period (Fatal), which ends the stream. The
	// write still ends when the core stops (offload).
	cmd, objects, err := offload(context.WithoutCancel(ctx), c, cmd)
	if err != nil {
		return server.Ack{}, err
	}
	if rr, ok := cmd.(engine.RPCResult); ok {
		return c.rpcResult(ctx, tok, rr, objects)
	}
	type outcome struct {
		d   decision
		ack server.Ack
	}
	o, err := call(ctx, c.seq, func() outcome {
		d, st := c.seq.decideObjects(tok.FlowID, cmd, objects)
		if d.err != nil {
			return outcome{d: d, ack: classify(d.err, st, tok)}
		}
		return outcome{d: d, ack: accepted(d.recs, tok)}
	})
	if err != nil {
		return server.Ack{}, err
	}
	if o.d.err != nil {
		if errors.Is(o.d.err, server.ErrNotServing) {
			return server.Ack{}, o.d.err
		}
		return o.ack, nil
	}
	if err := o.d.result(ctx); err != nil {
		return server.Ack{}, err
	}
	return o.ack, nil
}

// classify turns the engine's refusal of a result into an ack (W2).
func classify(err error, st *engine.FlowState, tok engine.Token) server.Ack {
	msg := err.Error()
	switch {
	case errors.Is(err, engine.ErrStaleToken):
		if st == nil || st.RunID != tok.RunID || !st.Running() || st.Step(tok.StepExecID) == nil {
			return server.Ack{Status: server.AckCanceled, Message: msg}
		}
		return server.Ack{Status: server.AckSuperseded, Message: msg}
	case engine.CodeOf(err) == engine.CodeInvalidArgument, engine.CodeOf(err) == engine.CodeResourceExhausted:
		return server.Ack{Status: server.AckInvalid, Message: msg}
	default:
		return server.Ack{Status: server.AckUnknownTask, Message: msg}
	}
}

// accepted is the ack of a committed result: INVALID when the engine failed
// the attempt for an invalid result (E28), else ACCEPTED.
func accepted(recs []engine.Record, tok engine.Token) server.Ack {
	for _, r := range recs {
		if f, ok := r.Body.(engine.AttemptFailed); ok && f.StepExecID == tok.StepExecID && f.Attempt == tok.Attempt &&
			f.Failure.Type == string(engine.ErrInvalidUserFlowCode) {
			return server.Ack{Status: server.AckInvalid, Message: f.Failure.Message}
		}
	}
	return server.Ack{Status: server.AckAccepted}
}

// register stores the flow types' declarations and sets the definition
// (with the declared default step options) of running runs that have none
// (W5, E13): for a type that is new or changed, and for a seeded type with
// such runs on its first declaration, which may equal the seed
// (seedDefinitions). A run keeps the first definition it got (engine doc:
// Flow definitions).
//
// Declarations whose index keys conflict with the registered ones
// (checkIndexKeys, E36) are refused, and none of the Hello's is stored.
func (c *Core) register(decls []server.FlowTypeDecl) error {
	changed := map[string]server.FlowTypeDecl{}
	c.defs.mu.Lock()
	if err := c.checkIndexKeys(decls); err != nil {
		c.defs.mu.Unlock()
		return err
	}
	for _, d := range decls {
		typ := d.Definition.Type
		if old, ok := c.defs.m[typ]; !ok || c.defs.unswept[typ] || !reflect.DeepEqual(old, d) {
			c.defs.m[typ] = d
			changed[typ] = d
		}
		delete(c.defs.unswept, typ)
	}
	c.defs.mu.Unlock()
	if len(changed) == 0 {
		return nil
	}
	c.seq.post(func() {
		var ids []string
		seen := map[string]bool{}
		c.seq.forEachHead(func(id string, st *engine.FlowState) {
			seen[id] = true
			if _, ok := changed[st.FlowType]; ok && st.Running() && st.Definition == nil {
				ids = append(ids, id)
			}
		})
		err := c.cfg.Store.RunningFlows(func(st *engine.FlowState) error {
			if _, ok := changed[st.FlowType]; ok && !seen[st.FlowID] && st.Definition == nil {
				ids = append(ids, st.FlowID)
			}
			return nil
		})
		if err != nil {
			c.log.Warn("definitions not set on running flows", "err", err)
		}
		for _, id := range ids {
			st, _ := c.seq.peek(id)
			if st == nil || st.Definition != nil {
				continue
			}
			decl := changed[st.FlowType]
			d, _ := c.seq.decide(id, engine.SetDefinition{FlowID: id, Definition: decl.Definition, Defaults: decl.Defaults})
			if d.err != nil {
				c.log.Warn("definition not set", "flowId", id, "err", d.err)
			}
		}
	})
	return nil
}
