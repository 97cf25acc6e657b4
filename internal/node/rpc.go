package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// DefaultRPCTimeout bounds an RPC call whose request sets no timeout.
const DefaultRPCTimeout = 30 * time.Second

// An RPC call (E22) is not logged until its result commits: InvokeRPC builds
// the task on the sequencer (Engine.RPCTask against the head state), queues
// it for a worker of the flow type and waits. The worker stream that
// receives the result submits RPCResult and, once it is durable, hands the
// output to the caller; a worker error goes to the caller and commits
// nothing. A caller that gives up leaves the call to commit if its result
// still arrives.
type rpcCall struct {
	id        string
	task      engine.Task
	timeout   time.Duration
	startedAt time.Time // set by the dispatcher when sent
	canceled  atomic.Bool
	done      chan rpcOutcome // buffered, 1
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

func (r *rpcCalls) add(rc *rpcCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[rc.id] = rc
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
		timeout = DefaultRPCTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	inv.CallID = fmt.Sprintf("%d.%d", c.cfg.Epoch, c.rpcSeq.Add(1))
	type built struct {
		task engine.Task
		err  error
	}
	b, err := call(ctx, c.seq, func() built {
		st, err := c.seq.peek(inv.FlowID)
		if err != nil {
			return built{err: err}
		}
		t, err := c.cfg.Engine.RPCTask(st, inv, c.cfg.Epoch)
		return built{task: t, err: err}
	})
	if err == nil {
		err = b.err
	}
	if err != nil {
		return server.RPCResult{}, err
	}
	rc := &rpcCall{id: inv.CallID, task: b.task, timeout: timeout, done: make(chan rpcOutcome, 1)}
	c.rpcs.add(rc)
	defer c.rpcs.remove(rc.id)
	c.disp.enqueueRPC(rc)
	select {
	case o := <-rc.done:
		return o.res, o.err
	case <-ctx.Done():
		rc.canceled.Store(true)
		return server.RPCResult{}, ctx.Err()
	case <-c.stopping:
		rc.canceled.Store(true)
		return server.RPCResult{}, ErrNotServing
	}
}

// rpcResult commits an RPC's result and answers its caller.
func (c *Core) rpcResult(ctx context.Context, tok engine.Token, rr engine.RPCResult) (server.Ack, error) {
	rc := c.rpcs.get(tok.CallID)
	if rc != nil {
		rr.StartedAt = rc.startedAt
		rr.Name, rr.Input = rc.task.RPC, rc.task.Input
	}
	rr.Token = tok
	d, err := call(ctx, c.seq, func() decision {
		d, _ := c.seq.decide(tok.FlowID, rr)
		return d
	})
	if err == nil {
		err = d.err
	}
	if err != nil {
		if errors.Is(err, ErrNotServing) {
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

// RPCFailed implements server.Session: the handler's error goes to the
// caller; nothing commits (E22).
func (s *session) RPCFailed(tok engine.Token, f engine.Failure) server.Ack {
	s.c.disp.finished(s, tokKey(tok))
	rc := s.c.rpcs.get(tok.CallID)
	if rc == nil || tok.Epoch != s.c.cfg.Epoch {
		return server.Ack{Status: server.AckUnknownTask, Message: "no RPC call is waiting for this result"}
	}
	rc.deliver(rpcOutcome{err: &server.WorkerError{Failure: f}})
	return server.Ack{Status: server.AckAccepted}
}
