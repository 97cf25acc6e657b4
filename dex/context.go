package dex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
)

// TaskInfo identifies the handler invocation a Context belongs to.
type TaskInfo struct {
	// Kind is the handler: KindWaitFor, KindExecute or KindRPC.
	Kind TaskKind
	// FlowType, FlowID and RunID name the flow execution.
	FlowType, FlowID, RunID string
	// StepType and StepExecutionID ("<StepType>-<n>") name the step
	// execution; empty for an RPC.
	StepType, StepExecutionID string
	// RPCName names the RPC; empty for WaitFor and Execute.
	RPCName string
	// Attempt is the attempt's number, from 1 (always 1 for an RPC).
	Attempt int
	// FirstAttemptTime is when attempt 1 of this handler started.
	FirstAttemptTime time.Time
	// AttemptTimeout is how long the server waits for this attempt; the
	// handler's context ends then.
	AttemptTimeout time.Duration
}

// Context is what a handler receives: a context.Context that ends when the
// attempt times out or the worker stops, plus the task's identity, the flow
// execution's attributes and the writes the handler stages. Attribute
// writes (Attribute.Set), channel publishes (Channel.Publish) and an RPC's
// movements (Schedule) are staged on the Context and commit atomically with
// the handler's result; nothing blocks on the server inside a handler.
//
// Only the SDK implements Context. To test handlers, run their flows with
// package dex/dextest (or single tasks with dexraw.HandleTask).
type Context interface {
	context.Context
	// Info identifies the task.
	Info() TaskInfo
	// Logger is the worker's logger with the task's identity attached.
	Logger() *slog.Logger
	// Heartbeat reports progress details of this attempt (E38): the
	// worker sends the latest at its next heartbeat, and the next attempt
	// of the handler (after a failure, a timeout or a lost worker) reads
	// them with HeartbeatDetails. Heartbeats themselves need no call: the
	// worker heartbeats every running attempt. A value that does not
	// encode fails the attempt.
	Heartbeat(details any)
	// SetLocal stages a step-execution local (E32): a small keyed value
	// a WaitFor writes and the same step execution's Execute reads with
	// Local (each of its attempts, also after a server restart). It
	// commits with the WaitFor's result; a later SetLocal of the key
	// wins. At most 64 keys and 64 KiB in total (keys and values): more
	// fails the attempt. Calling it from Execute or an RPC fails the
	// attempt. DefineLocal gives a typed key.
	SetLocal(key string, value any)
	// Local decodes the local key into ptr (like json.Unmarshal) and
	// reports whether the WaitFor wrote it (E32). In a WaitFor it reads
	// what the WaitFor staged.
	Local(key string, ptr any) (bool, error)
	// RecordEvent adds a user event (a name and a value, nil for none)
	// to the flow's history when the handler's result commits (E32),
	// from any handler: WaitFor, Execute or RPC. dexcli flow history and
	// the web UI's timeline show it.
	RecordEvent(name string, value any)

	state() *handlerState
}

// Schedule stages movements from an RPC handler: they commit
// atomically with the RPC's output and staged writes. Step handlers move by
// returning a Decision instead; calling Schedule from one fails the attempt.
func Schedule(ctx Context, movements ...Movement) {
	st := ctx.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.kind != KindRPC {
		st.fail(&invalidResultError{errors.New("dex.Schedule is for RPC handlers; a step moves by returning a Decision")})
		return
	}
	st.moves = append(st.moves, movements...)
}

// taskContext is the SDK's Context.
type taskContext struct {
	context.Context
	info TaskInfo
	log  *slog.Logger
	st   *handlerState
}

func (c *taskContext) Info() TaskInfo       { return c.info }
func (c *taskContext) Logger() *slog.Logger { return c.log }
func (c *taskContext) state() *handlerState { return c.st }

func (c *taskContext) SetLocal(key string, value any) {
	ev, err := encodeAny(value)
	c.st.setLocal(key, ev, err)
}

func (c *taskContext) Local(key string, ptr any) (bool, error) {
	ev := c.st.local(key)
	if ev == nil {
		return false, nil
	}
	if err := valueOf(ev).Decode(ptr); err != nil {
		return true, fmt.Errorf("local %q: %w", key, err)
	}
	return true, nil
}

func (c *taskContext) RecordEvent(name string, value any) {
	ev, err := encodeAny(value)
	c.st.recordEvent(name, ev, err)
}

// handlerState holds a task's attributes and the handler's staged writes.
// Handlers may stage from several goroutines, so it is locked.
type handlerState struct {
	mu     sync.Mutex
	flow   *flowDef
	kind   TaskKind
	attrs  map[string]*dexpb.EncodedValue // as handed out with the task
	queues map[string]uint32              // channel queue sizes (RPC)
	staged map[string]*dexpb.EncodedValue // latest staged write per name
	writes []*dexpb.Attribute
	pubs   []*dexpb.ChannelPublish
	moves  []Movement
	// cancels are the step types an RPC cancels (ScheduleCancel).
	cancels []string
	// beat is the running task's heartbeat state (nil outside a worker);
	// details are the details the previous attempt reported (E38).
	beat    *taskBeat
	details *dexpb.EncodedValue
	// locals are the step-execution locals (E32): the task's (Execute)
	// or those the WaitFor staged; events the user events staged.
	locals map[string]*dexpb.EncodedValue
	events []*dexpb.UserEvent
	errs   []error // staging and decoding errors; any fails the attempt
}

func newHandlerState(f *flowDef, t *dexpb.Task) *handlerState {
	st := &handlerState{
		flow:   f,
		kind:   TaskKind(t.GetKind()),
		attrs:  make(map[string]*dexpb.EncodedValue, len(t.GetAttributes())),
		queues: t.GetChannelQueueSizes(),
		staged: map[string]*dexpb.EncodedValue{},
	}
	for _, a := range t.GetAttributes() {
		st.attrs[a.GetName()] = a.GetValue()
	}
	if ls := t.GetLocals(); len(ls) > 0 {
		st.locals = make(map[string]*dexpb.EncodedValue, len(ls))
		for _, l := range ls {
			st.locals[l.GetKey()] = l.GetValue()
		}
	}
	return st
}

// fail records an error that fails the attempt once the handler returns.
// The caller holds mu.
func (st *handlerState) fail(err error) { st.errs = append(st.errs, err) }

// failLocked is fail, taking the lock.
func (st *handlerState) failLocked(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.fail(err)
}

// attribute returns the staged value of name, else the task's.
func (st *handlerState) attribute(name string) *dexpb.EncodedValue {
	st.mu.Lock()
	defer st.mu.Unlock()
	if v, ok := st.staged[name]; ok {
		return v
	}
	return st.attrs[name]
}

// attributeNames returns the names of the attributes that have a value
// as the handler sees them: the task's and the staged ones.
func (st *handlerState) attributeNames() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]string, 0, len(st.attrs)+len(st.staged))
	for n := range st.attrs {
		out = append(out, n)
	}
	for n := range st.staged {
		if _, ok := st.attrs[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

func (st *handlerState) setAttribute(name string, v *dexpb.EncodedValue, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case err != nil:
		st.fail(&encodeError{what: fmt.Sprintf("attribute %q", name), err: err})
	case !declaredIn(st.flow.attributes, name):
		st.fail(&invalidResultError{fmt.Errorf("set attribute %q: flow %q does not declare it (add it with Attributes)", name, st.flow.name)})
	default:
		st.staged[name] = v
		st.writes = append(st.writes, &dexpb.Attribute{Name: name, Value: v})
	}
}

func (st *handlerState) publish(channel string, v *dexpb.EncodedValue, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case err != nil:
		st.fail(&encodeError{what: fmt.Sprintf("message for channel %q", channel), err: err})
	case !declaredIn(st.flow.channels, channel):
		st.fail(&invalidResultError{fmt.Errorf("publish to channel %q: flow %q does not declare it (add it with Channels)", channel, st.flow.name)})
	default:
		// Consecutive publishes to one channel share a ChannelPublish; the
		// order of all messages is kept either way.
		if n := len(st.pubs); n > 0 && st.pubs[n-1].GetChannel() == channel {
			st.pubs[n-1].Values = append(st.pubs[n-1].Values, v)
			return
		}
		st.pubs = append(st.pubs, &dexpb.ChannelPublish{Channel: channel, Values: []*dexpb.EncodedValue{v}})
	}
}

// stagedWrites returns the writes to send, or nil when there are none.
func (st *handlerState) stagedWrites() *dexpb.StagedWrites {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.writes) == 0 && len(st.pubs) == 0 && len(st.events) == 0 {
		return nil
	}
	return &dexpb.StagedWrites{AttributeWrites: st.writes, ChannelPublishes: st.pubs, Events: st.events}
}

func (st *handlerState) setLocal(key string, v *dexpb.EncodedValue, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case err != nil:
		st.fail(&encodeError{what: fmt.Sprintf("local %q", key), err: err})
	case st.kind != KindWaitFor:
		st.fail(&invalidResultError{fmt.Errorf("SetLocal(%q) is for WaitFor handlers: Execute reads the locals its WaitFor wrote", key)})
	case key == "":
		st.fail(&invalidResultError{errors.New("SetLocal with an empty key")})
	default:
		if st.locals == nil {
			st.locals = map[string]*dexpb.EncodedValue{}
		}
		st.locals[key] = v
	}
}

func (st *handlerState) local(key string) *dexpb.EncodedValue {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.locals[key]
}

// stagedLocals returns a WaitFor's locals, sorted by key.
func (st *handlerState) stagedLocals() []*dexpb.StepLocal {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.locals) == 0 {
		return nil
	}
	out := make([]*dexpb.StepLocal, 0, len(st.locals))
	for _, k := range slices.Sorted(maps.Keys(st.locals)) {
		out = append(out, &dexpb.StepLocal{Key: k, Value: st.locals[k]})
	}
	return out
}

func (st *handlerState) recordEvent(name string, v *dexpb.EncodedValue, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case err != nil:
		st.fail(&encodeError{what: fmt.Sprintf("event %q", name), err: err})
	case name == "":
		st.fail(&invalidResultError{errors.New("RecordEvent with an empty name")})
	default:
		st.events = append(st.events, &dexpb.UserEvent{Name: name, Value: v})
	}
}

// err returns the staging errors, joined.
func (st *handlerState) err() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return errors.Join(st.errs...)
}
