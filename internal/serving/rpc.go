package serving

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/tracing"
	"github.com/dexzd/dexzd/internal/wal"
)

// defaultRPCTimeout bounds an RPC call whose request sets no timeout.
const defaultRPCTimeout = 30 * time.Second

// An RPC call (E22) is not logged until its result commits: InvokeRPC builds
// the task on the sequencer (Engine.RPCTask checks it against the head
// state; the task carries committed state only, see buildRPCTask), queues
// it for a worker of the flow type and waits. The worker stream that
// receives the result submits RPCResult and, once it is durable, hands the
// output to the caller; a worker error goes to the caller and commits
// nothing.
//
// Each call commits at most once: the engine remembers the run's committed
// call IDs, so a result the worker sends again (its stream broke before the
// TaskAck) decides nothing and is acknowledged ACCEPTED once the first
// commit is durable. A caller that gives up leaves the call to commit once
// if its result still arrives in this epoch: the call stays registered
// (for its name, input and start time, which the history keeps) until its
// result or failure arrives or the worker's slot for it would have expired
// (timeout plus reserveGrace). After a takeover the result is refused
// (STALE_EPOCH). Once the result reached the node its commit no longer
// depends on the worker's stream: a stream that breaks meanwhile does not
// turn a commit into an error for the caller.
type rpcCall struct {
	id        string
	task      engine.Task
	timeout   time.Duration
	startedAt time.Time // set by the dispatcher when sent
	canceled  atomic.Bool
	locked    bool            // the call took locks (E30, locks.go)
	done      chan rpcOutcome // buffered, 1
	expires   time.Time       // set once the caller gave up (rpcCalls.mu)
}

type rpcOutcome struct {
	res server.RPCResult
	err error
}

func (rc *rpcCall) deliver(o rpcOutcome) {
	select {
	case rc.done <- o:
	default:
	}
}

type rpcCalls struct {
	mu sync.Mutex
	m  map[string]*rpcCall
}

// add registers a call and forgets the abandoned calls that expired.
func (r *rpcCalls) add(rc *rpcCall, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, o := range r.m {
		if !o.expires.IsZero() && now.After(o.expires) {
			delete(r.m, id)
		}
	}
	r.m[rc.id] = rc
}

// abandon keeps a call whose caller gave up until its result can no longer
// arrive in this epoch (the worker's slot for it ends by then).
func (r *rpcCalls) abandon(rc *rpcCall, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc.expires = now.Add(rc.timeout + reserveGrace)
}

// resolved forgets an abandoned call once its result or failure arrived.
func (r *rpcCalls) resolved(rc *rpcCall) {
	if rc == nil || !rc.canceled.Load() {
		return // the caller's InvokeRPC removes it
	}
	r.remove(rc.id)
}

func (r *rpcCalls) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

func (r *rpcCalls) get(id string) *rpcCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

// InvokeRPC implements server.Backend.
func (c *Core) InvokeRPC(ctx context.Context, inv engine.InvokeRPC, timeout time.Duration) (server.RPCResult, error) {
	if timeout <= 0 {
		timeout = defaultRPCTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	inv.CallID = fmt.Sprintf("%d.%d", c.cfg.Epoch, c.rpcSeq.Add(1))
	inv, _, err := offload(ctx, c, inv)
	if err != nil {
		return server.RPCResult{}, err
	}
	locked := len(inv.Locks) > 0
	if locked {
		if err := c.lockRPC(ctx, inv); err != nil {
			return server.RPCResult{}, err
		}
	}
	task, err := c.buildRPCTask(ctx, inv)
	if err != nil {
		if locked {
			c.unlockRPC(inv, "the call's task could not be built: "+err.Error())
		}
		return server.RPCResult{}, err
	}
	rc := &rpcCall{id: inv.CallID, task: task, timeout: timeout, locked: locked, done: make(chan rpcOutcome, 1)}
	c.rpcs.add(rc, time.Now())
	c.disp.enqueueRPC(rc)
	// Waiting for the worker loads neither the sequencer nor the log: the
	// call stops counting against limits.maxPendingRequests (a few slow
	// RPCs would otherwise refuse all new work, found in review). Its
	// result commits like a worker's, never refused.
	server.ReleaseAdmission(ctx)
	c.rpcWaiting.Add(1)
	defer c.rpcWaiting.Add(-1)
	select {
	case o := <-rc.done:
		c.rpcs.remove(rc.id)
		if o.err != nil && locked {
			c.unlockRPC(inv, "the call failed: "+o.err.Error())
		}
		return o.res, o.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.stopping:
		err = server.ErrNotServing
	}
	rc.canceled.Store(true)
	c.rpcs.abandon(rc, time.Now())
	if locked {
		// E30: the locks go with the caller; a late result is refused.
		c.unlockRPC(inv, "the caller stopped waiting: "+err.Error())
	}
	return server.RPCResult{}, err
}

// buildRPCTask checks the call against the flow's head state and builds
// its task from committed state only (W4): with changes of the flow in
// flight, the attributes and queue sizes are the local store's. When the
// run itself is not durable yet (its start is in flight), it waits for the
// flow's latest envelope and tries again.
func (c *Core) buildRPCTask(ctx context.Context, inv engine.InvokeRPC) (engine.Task, error) {
	type built struct {
		task  engine.Task
		retry bool       // try again once last is durable
		last  wal.Future // the flow's latest envelope in flight
		err   error
	}
	for {
		b, err := call(ctx, c.seq, func() built {
			st, err := c.seq.peek(inv.FlowID)
			if err != nil {
				return built{err: err}
			}
			t, err := c.cfg.Engine.RPCTask(st, inv, c.cfg.Epoch)
			if err != nil {
				return built{err: err}
			}
			cst, last, ok, err := c.seq.committedState(inv.FlowID)
			switch {
			case err != nil:
				return built{err: err}
			case !ok:
				return built{task: t}
			case cst == nil || cst.RunID != t.RunID:
				return built{retry: true, last: last}
			}
			t.Attributes, t.QueueSizes = maps.Clone(cst.Attributes), cst.QueueSizes()
			return built{task: t}
		})
		if err == nil {
			err = b.err
		}
		if err != nil || !b.retry {
			if tc := tracing.Carrier(ctx); tc != nil {
				b.task.TraceContext = tc // the RPC's caller's trace
			}
			return b.task, err
		}
		if _, err := b.last.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return engine.Task{}, ctx.Err()
			}
			return engine.Task{}, fmt.Errorf("%w: %w", server.ErrNotServing, err)
		}
	}
}

// rpcResult commits an RPC's result and answers its caller. The commit
// outlives the worker's stream (ctx): only the sequencer stopping ends the
// wait for it.
func (c *Core) rpcResult(ctx context.Context, tok engine.Token, rr engine.RPCResult, objects bool) (server.Ack, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-c.seq.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	rc := c.rpcs.get(tok.CallID)
	defer c.rpcs.resolved(rc)
	if rc != nil {
		rr.StartedAt = rc.startedAt
		rr.Name, rr.Input = rc.task.RPC, rc.task.Input
		rr.Locked = rc.locked
	}
	rr.Token = tok
	d, err := call(ctx, c.seq, func() decision {
		if rc == nil && tok.Epoch == c.cfg.Epoch {
			// No caller is registered: it was answered (this is a resend)
			// or its registration expired (timeout plus grace). A resend
			// of a call the run remembers commits nothing (the engine
			// decides no records); any other result is refused, because
			// a call the run no longer remembers may have committed
			// already (E22: at most once).
			if st, err := c.seq.peek(tok.FlowID); err == nil && st != nil && st.RunID == tok.RunID &&
				!slices.Contains(st.RPCCallIDs, tok.CallID) {
				return decision{err: errRPCNotWaiting}
			}
		}
		d, _ := c.seq.decideObjects(tok.FlowID, rr, objects || rr.Input.Ref != "")
		return d
	})
	if err == nil {
		err = d.err
	}
	if err != nil {
		if errors.Is(err, server.ErrNotServing) {
			return server.Ack{}, err
		}
		if rc != nil {
			rc.deliver(rpcOutcome{err: err})
		}
		switch {
		case errors.Is(err, engine.ErrInvalidUserCode):
			return server.Ack{Status: server.AckInvalid, Message: err.Error()}, nil
		case errors.Is(err, engine.ErrStaleToken), errors.Is(err, engine.ErrFlowClosed):
			return server.Ack{Status: server.AckCanceled, Message: err.Error()}, nil
		default:
			return server.Ack{Status: server.AckUnknownTask, Message: err.Error()}, nil
		}
	}
	if err := d.result(ctx); err != nil {
		if rc != nil {
			rc.deliver(rpcOutcome{err: err})
		}
		return server.Ack{}, err
	}
	if rc != nil {
		rc.deliver(rpcOutcome{res: server.RPCResult{RunID: tok.RunID, Output: rr.Output}})
	}
	return server.Ack{Status: server.AckAccepted}, nil
}

// errRPCNotWaiting refuses an RPC result that no caller waits for and that
// the run does not remember committing.
var errRPCNotWaiting = errors.New("no RPC call is waiting for this result, and the run does not remember committing it: it may have committed already")

// RPCFailed implements server.Session: the handler's error goes to the
// caller; nothing commits (E22).
func (s *session) RPCFailed(tok engine.Token, f engine.Failure) server.Ack {
	s.c.disp.finished(s, tokKey(tok))
	rc := s.c.rpcs.get(tok.CallID)
	if rc == nil || tok.Epoch != s.c.cfg.Epoch {
		return server.Ack{Status: server.AckUnknownTask, Message: "no RPC call is waiting for this result"}
	}
	s.c.rpcs.resolved(rc)
	rc.deliver(rpcOutcome{err: &server.WorkerError{Failure: f}})
	return server.Ack{Status: server.AckAccepted}
}
