package serving

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// Validity is what the core needs of the lease: whether it may still act as
// the holder (lease.Holder.Valid).
type Validity interface{ Valid() bool }

// CoreConfig configures the serving core of one lease period.
type CoreConfig struct {
	NodeID    string
	ProcessID string
	Epoch     uint64
	Store     flowstore.Store
	Engine    *engine.Engine
	Lease     Validity
	Logger    *slog.Logger // nil: discard
	// MaxRecordBytes is the largest envelope the writer accepts (its
	// MaxBatchBytes less the record prefix).
	MaxRecordBytes int
	// HeartbeatInterval and PingInterval go to workers in Welcome.
	HeartbeatInterval time.Duration
	PingInterval      time.Duration
	// Metrics count the flows and step attempts of every durable batch
	// (flowcounts.go); nil counts nothing.
	Metrics FlowCounter
	// Admission bounds the new work accepted from clients (admission.go);
	// zero fields take the defaults.
	Admission AdmissionLimits
	// Values keeps value objects; a value of at least ValueObjectBytes
	// becomes one (valueobjects.go). Nil, or 0, keeps every value inline.
	// Values is also needed to read the objects a log written with them
	// names, whatever ValueObjectBytes is now.
	Values           ValueStore
	ValueObjectBytes int
	// Fatal is told of a store error that retrying will not help (a
	// value object refused as permanent: a full disk, a denied write),
	// as the log writer stops on one; the node ends the lease period with
	// it. Nil: the calls concerned fail, nothing more.
	Fatal func(error)
}

// Core is the serving loop of one active lease period: the sequencer, the
// writer's apply hook, the dispatcher, the timer wheel, the WaitForFlow
// waiters and pending RPC calls. It implements server.Backend.
//
// Life: NewCore; create the wal.Writer with OnDurable: core.OnDurable and
// hand it to SetWriter; Start; Recover; serve; BeginDrain and WaitIdle on a
// graceful stop; Stop. Package node runs the writer and the lease beside
// it (node.Supervise).
type Core struct {
	cfg CoreConfig
	log *slog.Logger

	seq     *sequencer
	disp    *dispatcher
	timers  *timerQueue
	waiters waiters
	// progress wakes the long polls on a run's progress (E35,
	// progress.go) after every batch that changed their flow, while
	// progressPolls (the number waiting) is not zero.
	progress      waiters
	progressPolls atomic.Int64
	rpcs          rpcCalls
	defs          registry

	serving  atomic.Bool
	draining atomic.Bool
	failed   atomic.Bool

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopping chan struct{}
	stopOnce sync.Once
	// life ends when the core stops (untilStopped).
	life    context.Context
	endLife context.CancelFunc
	rpcSeq  atomic.Uint64
	// rpcWaiting counts the InvokeRPC calls waiting for a worker (Admit).
	rpcWaiting atomic.Int64
}

var _ server.Backend = (*Core)(nil)

// NewCore returns a core that is not started.
func NewCore(cfg CoreConfig) *Core {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Engine == nil {
		cfg.Engine = engine.New(engine.Config{})
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 15 * time.Second
	}
	if cfg.MaxRecordBytes == 0 {
		cfg.MaxRecordBytes = wal.DefaultMaxBatchBytes - 8
	}
	c := &Core{
		cfg: cfg, log: cfg.Logger,
		stopping: make(chan struct{}),
	}
	c.life, c.endLife = context.WithCancel(context.Background())
	c.waiters.m = map[string]chan struct{}{}
	c.waiters.max = cfg.Admission.MaxFlowWaiters
	c.rpcs.m = map[string]*rpcCall{}
	c.defs.m = map[string]server.FlowTypeDecl{}
	c.defs.unswept = map[string]bool{}
	c.disp = newDispatcher(c)
	c.timers = newTimerQueue(c.fireTimer)
	return c
}

// SetWriter connects the log writer; call it once, before Start.
func (c *Core) SetWriter(w *wal.Writer) {
	c.seq = newSequencer(c.cfg.Engine, c.cfg.Store, w, c.cfg.MaxRecordBytes)
	c.seq.after = c.afterDecide
}

// Start starts the core's goroutines. Public calls are refused until
// Recover returns.
func (c *Core) Start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	for _, run := range []func(context.Context){c.seq.run, c.timers.run, c.disp.run} {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			run(ctx)
		}()
	}
}

// Stop ends every goroutine, wakes long polls and RPC callers with
// server.ErrNotServing and ends worker sessions. Records already submitted are
// still written by the writer; the caller stops it afterwards.
func (c *Core) Stop() {
	c.serving.Store(false)
	c.stopOnce.Do(func() {
		close(c.stopping)
		c.endLife()
	})
	c.disp.closeAll()
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// Serving implements server.Backend: active, recovered, not draining, not
// failed, and the lease valid right now (H2, L15).
func (c *Core) Serving() bool {
	return c.serving.Load() && !c.draining.Load() && !c.failed.Load() && c.leaseValid()
}

func (c *Core) leaseValid() bool { return c.cfg.Lease == nil || c.cfg.Lease.Valid() }

// Identity implements server.Backend.
func (c *Core) Identity() server.Identity {
	return server.Identity{NodeID: c.cfg.NodeID, Epoch: c.cfg.Epoch, ProcessID: c.cfg.ProcessID}
}

// Epoch returns the lease epoch the core serves under.
func (c *Core) Epoch() uint64 { return c.cfg.Epoch }

// BeginDrain stops handing out tasks and answering public calls, and tells
// every worker (A3, K2, L15).
func (c *Core) BeginDrain(reason server.DrainReason, timeout time.Duration, msg string) {
	c.draining.Store(true)
	c.disp.drain(server.Drain{Reason: reason, Timeout: timeout, Message: msg})
}

// Fail marks the core failed (lease lost, writer stopped): public calls
// answer UNAVAILABLE at once and workers are told.
func (c *Core) Fail(err error) {
	if c.failed.Swap(true) {
		return
	}
	c.log.Error("serving stopped", "err", err)
	c.disp.drain(server.Drain{Reason: server.DrainLeaseLost, Message: err.Error()})
}

// WaitIdle waits until no task handed to a worker is outstanding, or ctx
// ends.
func (c *Core) WaitIdle(ctx context.Context) error { return c.disp.waitIdle(ctx) }

// OnDurable is the writer's hook: apply the batch to the local store, then
// let the sequencer drop committed heads and perform the effects.
func (c *Core) OnDurable(b wal.Batch) error {
	a, err := applyBatchWith(c.cfg.Store, b, c.seq.known)
	if err != nil {
		return err
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.CountFlows(&a.flows)
	}
	if len(a.envelopes) > 0 {
		c.seq.post(func() {
			for flowID, n := range a.envelopes {
				c.seq.committed(flowID, n)
			}
		})
	}
	c.perform(a)
	if c.progressPolls.Load() > 0 {
		c.wakeProgress(a)
	}
	return nil
}

// perform carries out the effects of one applied batch.
func (c *Core) perform(a applied) {
	for _, e := range a.effects {
		switch e := e.(type) {
		case engine.DispatchTask:
			c.disp.enqueue(e.TaskRef)
		case engine.SendTask:
			st := a.states[e.Token.FlowID]
			task, err := st.Task(e.Token)
			if err != nil {
				// A later record of the batch made it moot.
				c.disp.release(tokKey(e.Token))
				continue
			}
			c.disp.sendStarted(e.Token, task)
		case engine.ArmTimer:
			if e.Timer.Kind == engine.TimerHeartbeat {
				c.armHeartbeat(e)
			} else {
				c.timers.arm(e)
			}
		case engine.CancelTask:
			c.disp.cancelTask(e)
		case engine.NotifyClosed:
			c.waiters.wake(e.FlowID)
			c.timers.dropRun(e.FlowID, e.RunID)
			c.disp.dropRun(e.FlowID, e.RunID)
		case engine.ReplyRPC, engine.NotifySuperseded:
			// RPC callers are answered by the worker stream that committed
			// the result; earlier runs stay readable in the store.
		}
	}
}

// fireTimer submits TimerFired for a due timer; a timer the engine no longer
// considers pending is dropped (E20).
func (c *Core) fireTimer(a engine.ArmTimer) {
	c.seq.post(func() {
		d, _ := c.seq.decide(a.FlowID, engine.TimerFired{FlowID: a.FlowID, RunID: a.RunID, Timer: a.Timer})
		if d.err != nil && !errors.Is(d.err, engine.ErrTimerNotPending) && engine.CodeOf(d.err) != engine.CodeNotFound {
			c.log.Warn("timer not fired", "flowId", a.FlowID, "runId", a.RunID, "timer", a.Timer.String(), "err", d.err)
		}
	})
}

// StartFlow implements server.Backend.
func (c *Core) StartFlow(ctx context.Context, s engine.StartFlow) (server.StartResult, error) {
	s.RunID = newRunID()
	// Check the input's shape here, on the caller's goroutine, against
	// the declaration known now (a JSON parse of up to 4 MiB must not hold
	// the sequencer every flow passes, issue 11); Decide skips the check
	// if the sequencer reads the same declaration, and checks otherwise.
	var checked *engine.FlowDefinition
	if decl, ok := c.defs.get(s.FlowType); ok && decl.Definition != nil {
		if err := engine.CheckStartInput(decl.Definition, s.StartStep, s.Input); err != nil {
			return server.StartResult{}, err
		}
		checked = decl.Definition
	}
	if err := c.refusedBeforeObjects(s.FlowID, c.declared(s, checked)); err != nil {
		return server.StartResult{}, err
	}
	s, objects, err := offload(ctx, c, s)
	if err != nil {
		return server.StartResult{}, err
	}
	d, err := call(ctx, c.seq, func() decision {
		// Read the declaration on the sequencer: a declaration that
		// arrives meanwhile either is read here or, posted after this,
		// finds this run in the head without a definition and sets it
		// (register). Read before the call, a run could start without
		// one after register's scan had passed (found in review).
		d, _ := c.seq.decideObjects(s.FlowID, c.declared(s, checked), objects)
		return d
	})
	if err == nil {
		err = d.result(ctx)
	}
	if err != nil {
		return server.StartResult{}, err
	}
	return server.StartResult{RunID: d.runID, AlreadyStarted: len(d.recs) == 0}, nil
}

// declared returns s with its flow type's declaration as known now (its
// definition, and its defaults unless s has a config), and InputChecked
// set if checked, the definition s's input was checked against, is it.
func (c *Core) declared(s engine.StartFlow, checked *engine.FlowDefinition) engine.StartFlow {
	if decl, ok := c.defs.get(s.FlowType); ok {
		s.Definition = decl.Definition
		if s.Config == nil {
			s.Config = decl.Defaults
		}
	}
	s.InputChecked = checked != nil && s.Definition == checked
	return s
}

// Command implements server.Backend.
func (c *Core) Command(ctx context.Context, flowID string, cmd engine.Command) (server.CommandResult, error) {
	if r, ok := cmd.(engine.ResetFlow); ok {
		// E37: the new run's ID, and the declaration known now (the
		// fixed worker's) for the new run.
		r.NewRunID = newRunID()
		if st, err := c.cfg.Store.Flow(flowID); err == nil && st != nil {
			if decl, ok := c.defs.get(st.FlowType); ok {
				r.Definition, r.Config = decl.Definition, decl.Defaults
			}
		}
		cmd = r
	}
	if err := c.refusedBeforeObjects(flowID, cmd); err != nil {
		return server.CommandResult{}, err
	}
	cmd, objects, err := offload(ctx, c, cmd)
	if err != nil {
		return server.CommandResult{}, err
	}
	d, err := call(ctx, c.seq, func() decision {
		d, _ := c.seq.decideObjects(flowID, cmd, objects)
		return d
	})
	if err == nil {
		err = d.result(ctx)
	}
	if code := engine.CodeOf(err); code == engine.CodeNotFound || code == engine.CodeFailedPrecondition {
		if run, rerr := c.retriedRun(ctx, flowID, cmd, d); rerr != nil {
			return server.CommandResult{}, rerr
		} else if run != "" {
			return server.CommandResult{RunID: run, Duplicate: true}, nil
		}
	}
	if err != nil {
		return server.CommandResult{}, err
	}
	// No records: the engine recognised a retry (a publish request ID, E16;
	// a reset's or continue-as-new's request ID, E37); d.result waited for
	// the flow's envelope in flight, if any.
	return server.CommandResult{RunID: d.runID, Status: d.status, Duplicate: len(d.recs) == 0}, nil
}

// retriedRun answers a retry of a ResetFlow or ContinueAsNew (E37) that
// the engine refused because the run its first send made is no longer
// the latest either (it was continued, retried or reset since; Decide sees
// only the latest run): the named run's committed state says which run its
// request ID made. The first send may still be in flight (its reply was
// lost before it committed, and the head moved on past its run: a carried
// attempt's decision continued that run again), so the retry first waits
// for the flow's envelopes in flight at its refusal (d.inflight), the
// first send's among them. "" when cmd is not such a retry.
func (c *Core) retriedRun(ctx context.Context, flowID string, cmd engine.Command, d decision) (string, error) {
	var runID, id string
	var next func(*engine.FlowState, string) string
	switch x := cmd.(type) {
	case engine.ResetFlow:
		runID, id, next = x.RunID, x.RequestID, (*engine.FlowState).ResetByRequest
	case engine.ContinueAsNew:
		runID, id, next = x.RunID, x.RequestID, (*engine.FlowState).ContinuedByRequest
	default:
		return "", nil
	}
	if runID == "" || id == "" {
		return "", nil
	}
	if d.hasInflight {
		if _, err := d.inflight.Wait(ctx); err != nil {
			return "", fmt.Errorf("%w: %w", server.ErrNotServing, err)
		}
	}
	st, err := c.cfg.Store.Run(flowID, runID)
	if err != nil || st == nil {
		return "", nil
	}
	return next(st, id), nil
}

// Flow implements server.Backend: committed state only, with the bytes of
// its value objects.
func (c *Core) Flow(ctx context.Context, flowID, runID string) (*engine.FlowState, error) {
	st, err := c.flow(flowID, runID)
	if err != nil {
		return nil, err
	}
	return c.withValues(ctx, st)
}

// withValues returns st with the bytes of its value objects.
func (c *Core) withValues(ctx context.Context, st *engine.FlowState) (*engine.FlowState, error) {
	return resolveOf(ctx, c, st.FlowID, st)
}

// withOutputValues returns st with the bytes of its outputs' value objects
// only: all that a flow's result carries (WaitForFlow; server.resultOut
// reads the history's times, decisions and failures, not its values). The
// copy shares everything else with st, whose other values keep their
// references without bytes, so a result costs one object read per output
// rather than one per object the run ever named.
func (c *Core) withOutputValues(ctx context.Context, st *engine.FlowState) (*engine.FlowState, error) {
	outs, err := resolveOf(ctx, c, st.FlowID, st.Outputs)
	if err != nil {
		return nil, err
	}
	r := *st
	r.Outputs = outs
	return &r, nil
}

// resolveOf is resolve for a part of flowID's state, with its errors as the
// API reports them.
func resolveOf[T any](ctx context.Context, c *Core, flowID string, x T) (T, error) {
	ctx, done := c.untilStopped(ctx)
	defer done()
	out, err := resolve(ctx, c, x)
	var zero T
	switch {
	case errors.Is(err, wal.ErrCorrupt):
		// A damaged or missing object: retrying elsewhere reads the same.
		return zero, fmt.Errorf("%w: flow %q: %w", server.ErrDataLoss, flowID, err)
	case err != nil:
		return zero, fmt.Errorf("%w: flow %q: %w", server.ErrNotServing, flowID, err)
	}
	return out, nil
}

// flow reads the committed state of a run; value objects keep their
// references.
func (c *Core) flow(flowID, runID string) (*engine.FlowState, error) {
	if flowID == "" {
		return nil, &engine.Error{Code: engine.CodeInvalidArgument, Field: "flowId", Message: "must not be empty"}
	}
	var st *engine.FlowState
	var err error
	if runID == "" {
		st, err = c.cfg.Store.Flow(flowID)
	} else {
		st, err = c.cfg.Store.Run(flowID, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("read flow %q: %w", flowID, err)
	}
	if st == nil {
		if runID != "" {
			return nil, &engine.Error{Code: engine.CodeNotFound, Message: fmt.Sprintf("flow %q has no run %s", flowID, runID)}
		}
		return nil, &engine.Error{Code: engine.CodeNotFound, Message: fmt.Sprintf("flow %q not found", flowID)}
	}
	return st, nil
}

// ListFlows implements server.Backend.
func (c *Core) ListFlows(_ context.Context, q server.ListQuery) ([]engine.Summary, string, error) {
	out, next, err := c.cfg.Store.ListFlows(flowstore.ListQuery(q))
	if errors.Is(err, flowstore.ErrBadPageToken) {
		return nil, "", &engine.Error{Code: engine.CodeInvalidArgument, Field: "pageToken", Message: err.Error()}
	}
	return out, next, err
}

// TaskInfo implements server.Backend.
func (c *Core) TaskInfo() server.TaskInfo { return c.disp }

// registry holds the flow type declarations workers registered; the
// latest one received wins.
type registry struct {
	mu sync.Mutex
	m  map[string]server.FlowTypeDecl
	// unswept holds the seeded types whose running runs without a
	// definition wait for the type's first declaration (seedDefinitions).
	unswept map[string]bool
}

func (r *registry) get(flowType string) (server.FlowTypeDecl, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.m[flowType]
	return d, ok
}

func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
