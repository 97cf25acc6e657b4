package serving

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// Value objects (issue 11; wal/values.go has the objects, engine.Value's
// Ref and Size the references, valuewalk.go the walk). A value of at least
// CoreConfig.ValueObjectBytes that a client or a worker sends is written as
// an object of its own before its command reaches the sequencer, on the
// caller's goroutine, beside every other caller's; the command then names
// the object and still carries the bytes, so that Decide checks them, and
// the sequencer strips the bytes from the records before they are encoded.
// The log, the writer, the local store, the state cache and the
// dispatcher's queues hold a reference of some hundred bytes: one large
// flow no longer stalls every other flow's batches behind megabytes of
// encoding, writing and applying, and the memory a large value takes is
// that of the calls that carry it.
//
// The bytes are loaded back where a value leaves the server: the states
// Flow and WaitForFlow answer, and the tasks a session hands to its
// worker stream (Take). The object is durable before the record that
// names it is submitted, so every reference in the log names a durable
// object: a crash, a failover or a replay anywhere finds it (the objects
// live in the durable store, not on this process's disk).

// ValueStore keeps value objects: wal.Values over the node's durable store.
type ValueStore interface {
	Put(ctx context.Context, data []byte) (ref string, err error)
	Get(ctx context.Context, ref string) ([]byte, error)
}

var _ ValueStore = (*wal.Values)(nil)

// offloads reports whether values of this core may become objects.
func (c *Core) offloads() bool { return c.cfg.Values != nil && c.cfg.ValueObjectBytes > 0 }

// offload writes every value of x of at least ValueObjectBytes as a value
// object and returns x with those values naming their objects (their
// bytes kept), and whether there was any. A value is named by its bytes
// alone: a reference it carries is written again (the object is found
// there, or was never written) rather than trusted.
func offload[T any](ctx context.Context, c *Core, x T) (T, bool, error) {
	if !c.offloads() {
		return x, false, nil
	}
	if n, ok := valueBytes(x); ok && n < c.cfg.ValueObjectBytes {
		return x, false, nil // no value of it can be large: skip the walk
	}
	octx, done := c.untilStopped(ctx)
	defer done()
	found := false
	out, err := mapEngineValues(x, func(v engine.Value) (engine.Value, bool, error) {
		switch {
		case v.Ref != "" && v.Data == nil:
			found = true // an object already, without its bytes
			return v, false, nil
		case len(v.Data) < c.cfg.ValueObjectBytes && v.Ref != "":
			v.Ref, v.Size = "", 0 // inline, as any value of its size
			return v, true, nil
		case len(v.Data) < c.cfg.ValueObjectBytes:
			return v, false, nil
		}
		ref, err := c.cfg.Values.Put(octx, v.Data)
		if err != nil {
			return v, false, err
		}
		v.Ref, v.Size = ref, len(v.Data)
		found = true
		return v, true, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return x, false, ctx.Err()
		}
		if octx.Err() != nil {
			return x, false, server.ErrNotServing // the core stopped: retry on the active process
		}
		if (blob.Classify(err) == blob.ErrPermanent || errors.Is(err, wal.ErrValueWriteTimeout)) && c.cfg.Fatal != nil {
			// As the log writer does (L10): the store takes no writes.
			c.cfg.Fatal(err)
		}
		return x, false, fmt.Errorf("%w: %w", server.ErrNotServing, err)
	}
	return out, found, nil
}

// refusedBeforeObjects returns the engine's refusal of a client's cmd on
// flowID's committed state when cmd carries values that would become
// objects, so that a request refused anyway (an unknown or closed flow, an
// undeclared name, a value of the wrong shape, a limit) writes no object:
// bad input changes nothing, the store included. It returns nil when the
// committed state accepts cmd (the sequencer then decides on the head, as
// for any command) or cannot be read (the sequencer reports that). A
// refusal on the committed state is a valid answer: every change a client
// was told of is committed before the answer, so the command is decided as
// if it had arrived before the changes still in flight. Decide runs here,
// on the caller's goroutine, only for commands with large values.
func (c *Core) refusedBeforeObjects(flowID string, cmd engine.Command) error {
	if !c.offloads() {
		return nil
	}
	if n, ok := valueBytes(cmd); !ok || n < c.cfg.ValueObjectBytes {
		return nil
	}
	st, err := c.cfg.Store.Flow(flowID)
	if err != nil {
		return nil
	}
	_, err = c.cfg.Engine.Decide(st, cmd, time.Now())
	if ee := (*engine.Error)(nil); errors.As(err, &ee) {
		return err
	}
	return nil
}

// untilStopped returns ctx, also canceled when the core stops: a call
// writing or reading value objects ends with the core, as a call waiting
// on the sequencer does, instead of retrying the store until its own
// deadline (its caller then retries on the active process).
func (c *Core) untilStopped(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// resolve returns x with the bytes of every value object it names loaded
// from the core's value store (WithValueBytes).
func resolve[T any](ctx context.Context, c *Core, x T) (T, error) {
	return resolveShared(ctx, c, x, nil)
}

// resolveShared is resolve with the objects already read in loaded (nil:
// none), which it adds to.
func resolveShared[T any](ctx context.Context, c *Core, x T, loaded map[string][]byte) (T, error) {
	if c.cfg.Values == nil {
		return x, nil
	}
	return withValueBytes(ctx, c.cfg.Values, x, loaded)
}

// WithValueBytes returns x (a state, a task, a record) with the bytes of
// every value object it names loaded from values. x itself is not
// modified: states and tasks may be shared with the state cache. An object
// named in several places (a moved input, an output that is also in the
// history) is read once, and its values share the bytes.
func WithValueBytes[T any](ctx context.Context, values ValueStore, x T) (T, error) {
	return withValueBytes(ctx, values, x, nil)
}

func withValueBytes[T any](ctx context.Context, values ValueStore, x T, loaded map[string][]byte) (T, error) {
	out, err := mapEngineValues(x, func(v engine.Value) (engine.Value, bool, error) {
		if v.Ref == "" || v.Data != nil {
			return v, false, nil
		}
		data, ok := loaded[v.Ref]
		if !ok {
			var err error
			if data, err = values.Get(ctx, v.Ref); err != nil {
				return v, false, err
			}
			if loaded == nil {
				loaded = map[string][]byte{}
			}
			loaded[v.Ref] = data
		}
		if len(data) != v.Size {
			return v, false, fmt.Errorf("value object %s holds %d bytes, its reference says %d", v.Ref, len(data), v.Size)
		}
		v.Data = data
		return v, true, nil
	})
	if err != nil && ctx.Err() != nil {
		return x, ctx.Err()
	}
	return out, err
}

// errValueUnavailable is the failure type of an attempt whose task could
// not be given its values (a value object could not be read).
const errValueUnavailable = "ValueUnavailable"

// resolveTasks loads the value objects of the tasks in msgs. A task whose
// values cannot be loaded is not handed out: its attempt fails (the retry
// policy applies; an RPC's caller gets the error), as a task too large for
// its worker does, and the others go on.
func (s *session) resolveTasks(msgs []server.Outgoing) []server.Outgoing {
	c := s.c
	if c.cfg.Values == nil {
		return msgs
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	out := msgs[:0:0]
	loaded := map[string][]byte{} // the tasks of one flow share its attributes
	for _, m := range msgs {
		if m.Task == nil {
			out = append(out, m)
			continue
		}
		t, err := resolveShared(ctx, c, *m.Task, loaded)
		if err == nil {
			m.Task = &t
			out = append(out, m)
			continue
		}
		tok := m.Task.Token
		f := engine.Failure{Type: errValueUnavailable, Message: fmt.Sprintf("the task's values could not be read: %v", err)}
		c.log.Error("task not sent: its values could not be read", "flowId", tok.FlowID, "stepExecId", tok.StepExecID,
			"method", string(tok.Method), "attempt", tok.Attempt, "err", err)
		if errors.Is(err, context.Canceled) {
			continue // the session ended: the attempt times out (W3)
		}
		if tok.Method == engine.MethodRPC {
			s.RPCFailed(tok, f)
			continue
		}
		go func() {
			if _, err := s.Result(context.Background(), tok, engine.TaskFailed{Token: tok, Failure: f}); err != nil {
				c.log.Warn("the attempt of a task without its values was not failed; it times out", "flowId", tok.FlowID, "err", err)
			}
		}()
	}
	return out
}

// valueBytes sums the lengths of the values of the requests that carry
// them, so that offload skips the walk of a request whose values together
// are below the threshold (most are). ok is false for any other type: it
// is walked. A field this misses only keeps a large value in the log, as
// without value objects; it never loses one.
func valueBytes(x any) (n int, ok bool) {
	writes := func(ws []engine.AttributeWrite) (n int) {
		for _, w := range ws {
			n += len(w.Value.Data)
		}
		return n
	}
	publishes := func(ps []engine.Publish) (n int) {
		for _, p := range ps {
			n += len(p.Value.Data)
		}
		return n
	}
	moves := func(ms []engine.Movement) (n int) {
		for _, m := range ms {
			n += len(m.Input.Data)
		}
		return n
	}
	staged := func(s engine.Staged) int { return writes(s.Attributes) + publishes(s.Publishes) }
	switch c := x.(type) {
	case engine.StartFlow:
		return len(c.Input.Data) + writes(c.Attributes), true
	case engine.SetAttributes:
		return writes(c.Attributes), true
	case engine.PublishToChannel:
		return publishes(c.Messages), true
	case engine.InvokeRPC:
		return len(c.Input.Data), true
	case engine.ExecuteResult:
		return len(c.Decision.Output.Data) + moves(c.Decision.Movements) + staged(c.Staged), true
	case engine.RPCResult:
		return len(c.Output.Data) + moves(c.Movements) + staged(c.Staged), true
	case engine.WaitForResult:
		if c.Wait != nil {
			return 0, false
		}
		return staged(c.Staged), true
	case engine.TaskFailed, engine.StopFlow, engine.SkipTimer, engine.ResetFlow:
		return 0, true
	}
	return 0, false
}
