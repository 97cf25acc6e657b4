package serving

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/tracing"
	"github.com/dexzd/dexzd/internal/wal"
	"go.opentelemetry.io/otel/trace"
)

// The sequencer is the single goroutine that decides. Every command (client
// calls, worker results, timers, task starts) runs on it: it loads the
// flow's head state, calls engine.Decide, applies the records to the head
// copy and submits them to the log writer as one envelope, so the next
// command of the same flow sees them even before they are durable. Callers
// wait for the envelope's future: it completes after the batch is durable
// and applied to the local store (G3).
//
// Head states: a flow with envelopes in flight has a head in memory, ahead
// of the local store; every other flow's head is its committed state in the
// local store. When the writer has applied a batch (OnDurable) it posts the
// envelope counts back here, and a head whose envelopes are all committed is
// dropped: the store then holds exactly that state.
//
// Held records (ASYNC starts, W4): hold decides a command like decide and
// applies its records to the head, but does not submit them. They go to
// the log in front of the next envelope of the same flow (in practice the
// task's result, so an ASYNC step costs one log record, not two), or on
// their own once they were held for holdLimit. A crash loses them, which
// T3 allows: the attempt is still PENDING in the log, and the next process
// dispatches it again with the same number.
type sequencer struct {
	eng       *engine.Engine
	store     flowstore.Store
	submit    func(record []byte, parent trace.SpanContext) wal.Future
	maxRecord int

	mu      sync.Mutex
	queue   []func()
	wake    chan struct{}
	stopped chan struct{} // closed when run returns

	// Admission of new work (admit): the client calls admitted and not
	// answered yet, and their request bytes; queued reports the log
	// writer's queued bytes (wal.Writer.QueuedBytes).
	amu          sync.Mutex
	pendingReqs  int
	pendingBytes int64
	queued       func() int64
	// refusals counts the calls refused; lastLog is when a line about
	// them was last logged (UnixNano).
	refusals atomic.Int64
	lastLog  atomic.Int64

	// submitted maps the envelopes in flight (by the address of their
	// first byte: the writer hands OnDurable the same slices) to their
	// records, so that applying them needs no decoding (known).
	smu       sync.Mutex
	submitted map[*byte][]engine.Record

	// Owned by the run goroutine.
	//
	// span is the span context of the call whose function runs now
	// (call), when it is sampled: its envelopes' log writes are traced
	// under it. Without one, an envelope of a traced run is traced under
	// the run's start (FlowState.TraceContext).
	span   trace.SpanContext
	heads  map[string]*head
	broken error
	heldQ  []heldRef // heads that held records, oldest first

	// after, when set, runs after an envelope of flowID was submitted,
	// with the head state after recs (the subflow step, subflow.go).
	after func(flowID string, st *engine.FlowState, recs []engine.Record)
}

// heldRef queues a head that started holding records at since; it is stale
// once the head's held records went out (or it holds newer ones).
type heldRef struct {
	flowID string
	h      *head
	since  time.Time
}

type head struct {
	st       *engine.FlowState
	inflight int        // envelopes submitted and not yet applied to the store
	last     wal.Future // the latest of them, when inflight was ever > 0
	hasLast  bool

	held      []engine.Record // decided, applied to st, not submitted yet
	heldSince time.Time
}

// holdLimit bounds how long held records wait for the flow's next envelope.
const holdLimit = 20 * time.Millisecond

// logWriter is what the sequencer needs of the log writer.
type logWriter interface {
	SubmitTraced(record []byte, parent trace.SpanContext) wal.Future
	QueuedBytes() int64
}

func newSequencer(eng *engine.Engine, store flowstore.Store, w logWriter, maxRecord int) *sequencer {
	return &sequencer{
		eng: eng, store: store, submit: w.SubmitTraced, queued: w.QueuedBytes, maxRecord: maxRecord,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), heads: map[string]*head{},
		submitted: map[*byte][]engine.Record{},
	}
}

// known returns, and forgets, the records of an envelope the sequencer
// submitted; nil for any other. The records are shared with the head
// states, which is safe: engine.Apply never modifies a record's contents.
func (s *sequencer) known(raw []byte) []engine.Record {
	if len(raw) == 0 {
		return nil
	}
	k := unsafe.SliceData(raw)
	s.smu.Lock()
	defer s.smu.Unlock()
	recs, ok := s.submitted[k]
	if !ok {
		return nil
	}
	delete(s.submitted, k)
	return recs
}

// Retry hints of the refusals of new work: the pipeline (sequencer and
// log writer) drains within a few batch writes, a task queue at the
// workers' pace.
const (
	retryPipeline = 100 * time.Millisecond
	retryTasks    = 500 * time.Millisecond
)

// admit reserves room for one client call of n request bytes that asks for
// new work, or refuses it with an *server.OverloadError when the calls
// admitted and not answered reach lim.MaxPendingRequests, their bytes
// would pass lim.MaxPendingBytes (a call alone is admitted whatever its
// size), the sequencer's queue holds lim.MaxPendingRequests functions, or
// the log writer's queue holds lim.MaxPendingBytes. release, called once
// the call is answered, frees the room. Work that is not new (results,
// timers, task starts, recovery) never passes here: it is posted whatever
// the load, and it is what frees capacity (doc.go: Bounded load).
func (s *sequencer) admit(n int64, lim AdmissionLimits) (release func(), err error) {
	refuse := func(limit, msg string) (func(), error) {
		return nil, &server.OverloadError{Limit: limit, RetryAfter: retryPipeline, Message: msg}
	}
	s.mu.Lock()
	queued := len(s.queue)
	s.mu.Unlock()
	if queued >= lim.MaxPendingRequests {
		return refuse("limits.maxPendingRequests", fmt.Sprintf("%d commands wait for the sequencer", queued))
	}
	if q := s.queued(); q >= lim.MaxPendingBytes {
		return refuse("limits.maxPendingBytes", fmt.Sprintf("%d bytes wait for a log write", q))
	}
	s.amu.Lock()
	defer s.amu.Unlock()
	switch {
	case s.pendingReqs >= lim.MaxPendingRequests:
		return refuse("limits.maxPendingRequests", fmt.Sprintf("%d requests are in progress", s.pendingReqs))
	case s.pendingReqs > 0 && s.pendingBytes+n > lim.MaxPendingBytes:
		return refuse("limits.maxPendingBytes", fmt.Sprintf("requests of %d bytes are in progress", s.pendingBytes))
	}
	s.pendingReqs++
	s.pendingBytes += n
	var once sync.Once
	return func() {
		once.Do(func() {
			s.amu.Lock()
			s.pendingReqs--
			s.pendingBytes -= n
			s.amu.Unlock()
		})
	}, nil
}

// pending returns the admitted client calls not answered yet and their
// request bytes.
func (s *sequencer) pending() (int, int64) {
	s.amu.Lock()
	defer s.amu.Unlock()
	return s.pendingReqs, s.pendingBytes
}

// post queues fn to run on the sequencer goroutine. It never blocks.
func (s *sequencer) post(fn func()) {
	s.mu.Lock()
	s.queue = append(s.queue, fn)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run executes posted functions in order until ctx ends, and submits held
// records that waited holdLimit.
func (s *sequencer) run(ctx context.Context) {
	defer close(s.stopped)
	for {
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, fn := range q {
			fn()
		}
		var t *time.Timer
		var due <-chan time.Time
		if next, ok := s.flushHeld(); ok {
			t = time.NewTimer(max(time.Until(next), 0))
			due = t.C
		}
		select {
		case <-s.wake:
		case <-due:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// flushHeld submits the held records that waited holdLimit, each flow's as
// one envelope, and returns when the next ones are due (ok: some are held).
func (s *sequencer) flushHeld() (next time.Time, ok bool) {
	now := time.Now()
	for len(s.heldQ) > 0 {
		r := s.heldQ[0]
		h, id := r.h, r.flowID
		if len(h.held) > 0 && h.heldSince.Equal(r.since) {
			if due := r.since.Add(holdLimit); due.After(now) {
				return due, true
			}
		}
		s.heldQ[0] = heldRef{}
		s.heldQ = s.heldQ[1:]
		if len(h.held) == 0 || !h.heldSince.Equal(r.since) {
			continue // went out with a later envelope
		}
		recs := h.held
		h.held = nil
		if s.broken != nil {
			continue
		}
		data, err := encodeEnvelope(recs)
		if err == nil && len(data) > s.maxRecord {
			err = fmt.Errorf("held records of flow %q are %d bytes encoded, above the log record limit", id, len(data))
		}
		if err != nil {
			// Not logged: like a crash before the start was durable (T3).
			if h.inflight <= 0 && s.heads[id] == h {
				delete(s.heads, id)
			}
			continue
		}
		// An error breaks the sequencer (s.broken): nothing more to do.
		_, _ = s.submitEnvelope(id, h, recs, data, trace.SpanContext{})
	}
	return next, ok
}

// call runs fn on the sequencer and returns its result, or an error when
// ctx ends or the sequencer stopped first.
func call[T any](ctx context.Context, s *sequencer, fn func() T) (T, error) {
	ch := make(chan T, 1)
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		s.post(func() {
			s.span = sc
			v := fn()
			s.span = trace.SpanContext{}
			ch <- v
		})
	} else {
		s.post(func() { ch <- fn() })
	}
	var zero T
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-s.stopped:
		return zero, server.ErrNotServing
	}
}

// decision is the outcome of one decide.
type decision struct {
	recs   []engine.Record
	fut    wal.Future // valid when wait is set
	wait   bool
	runID  string // the head's run after the records
	status engine.Status
	err    error
	// inflight is the flow's latest envelope in flight when the command
	// was refused (err set; valid when hasInflight): what a refused retry
	// of a reset or continue-as-new waits for before it looks for its
	// first send's outcome in the committed state (Core.retriedRun).
	inflight    wal.Future
	hasInflight bool
}

// result waits for the decision's future, if any.
func (d decision) result(ctx context.Context) error {
	if d.err != nil || !d.wait {
		return d.err
	}
	if _, err := d.fut.Wait(ctx); err != nil {
		return fmt.Errorf("%w: %w", server.ErrNotServing, err)
	}
	return nil
}

// load returns the flow's head state: the in-memory head, or the committed
// state from the store.
func (s *sequencer) load(flowID string) (*engine.FlowState, *head, error) {
	if h := s.heads[flowID]; h != nil {
		return h.st, h, nil
	}
	st, err := s.store.Flow(flowID)
	if err != nil {
		return nil, nil, fmt.Errorf("read flow %q: %w", flowID, err)
	}
	return st, nil, nil
}

// peek returns the flow's head state for reading on the sequencer goroutine;
// the caller must not keep or modify it.
func (s *sequencer) peek(flowID string) (*engine.FlowState, error) {
	st, _, err := s.load(flowID)
	return st, err
}

// committedState returns the committed state of flowID (as the local store
// holds it) when envelopes of the flow are in flight, and ok=false when
// there are none: the head is then the committed state, plus held ASYNC
// starts at most, which change no value a task carries. Tasks are built
// from committed state only (W4, see dispatcher.start and InvokeRPC): a
// change still in flight can be lost in a crash, and a handler must never
// have acted on a value that did not become durable. last is the flow's
// latest envelope in flight (ok only).
func (s *sequencer) committedState(flowID string) (st *engine.FlowState, last wal.Future, ok bool, err error) {
	h := s.heads[flowID]
	if h == nil || h.inflight <= 0 {
		return nil, wal.Future{}, false, nil
	}
	st, err = s.store.Flow(flowID)
	if err != nil {
		return nil, wal.Future{}, true, fmt.Errorf("read flow %q: %w", flowID, err)
	}
	return st, h.last, true, nil
}

// decide decides cmd against the flow's head state, applies the records to
// the head and submits them as one envelope. It returns the decision and the
// head state before the command (nil when the flow ID has none), which only
// the sequencer goroutine may read. A command that changes nothing waits for
// the flow's latest envelope in flight, so that its answer too is based on
// durable state only.
func (s *sequencer) decide(flowID string, cmd engine.Command) (decision, *engine.FlowState) {
	return s.decideObjects(flowID, cmd, false)
}

// decideObjects is decide for a command that may name value objects
// (objects: it does, see valueobjects.go): their bytes, which Decide may
// check, are stripped from the records before anything keeps them (the
// head, the log, the local store).
func (s *sequencer) decideObjects(flowID string, cmd engine.Command, objects bool) (decision, *engine.FlowState) {
	st, h, recs, d, done := s.against(flowID, cmd)
	if objects && !done {
		recs = stripValueData(recs)
	}
	if done {
		if h != nil && h.hasLast {
			if d.err == nil {
				d.fut, d.wait = h.last, true
			} else {
				d.inflight, d.hasInflight = h.last, true
			}
		}
		return d, st
	}
	all := recs
	if h != nil && len(h.held) > 0 {
		all = append(slices.Clip(h.held), recs...)
	}
	data, err := encodeEnvelope(all)
	if err != nil {
		return decision{err: err}, st
	}
	if len(data) > s.maxRecord {
		return decision{err: &engine.Error{Code: engine.CodeResourceExhausted, Field: "request",
			Message: fmt.Sprintf("the change is %d bytes encoded, above the log record limit of %d bytes", len(data), s.maxRecord)}}, st
	}
	st, h = s.advance(flowID, st, h, recs)
	h.held = nil // they go out in front of recs
	parent := s.span
	if !parent.IsSampled() && st.TraceContext != nil {
		parent = tracing.SpanContextOf(st.TraceContext)
	}
	fut, err := s.submitEnvelope(flowID, h, all, data, parent)
	if err != nil {
		return decision{err: err}, nil
	}
	d = decision{recs: recs, fut: fut, wait: true, runID: st.RunID, status: st.Status}
	if s.after != nil {
		s.after(flowID, st, recs)
	}
	return d, st
}

// submitEnvelope submits the encoded records all of flowID's head h.
func (s *sequencer) submitEnvelope(flowID string, h *head, all []engine.Record, data []byte, parent trace.SpanContext) (wal.Future, error) {
	k := unsafe.SliceData(data)
	s.smu.Lock()
	s.submitted[k] = all
	s.smu.Unlock()
	fut := s.submit(data, parent)
	select {
	case <-fut.Done():
		if _, err := fut.Result(); err != nil {
			s.smu.Lock()
			delete(s.submitted, k)
			s.smu.Unlock()
			// Refused at once: the writer stopped. The heads may now be
			// ahead of the log; decide nothing more.
			s.broken = fmt.Errorf("%w: %w", server.ErrNotServing, err)
			return fut, s.broken
		}
	default:
	}
	h.last, h.hasLast = fut, true
	h.inflight++
	return fut, nil
}

// hold decides cmd against the flow's head state and applies the records
// to the head like decide, but holds them back: they are submitted in
// front of the flow's next envelope, or on their own after holdLimit. The
// decision has no future. It returns the head state after the command.
func (s *sequencer) hold(flowID string, cmd engine.Command) (decision, *engine.FlowState) {
	st, h, recs, d, done := s.against(flowID, cmd)
	if done {
		return d, st
	}
	st, h = s.advance(flowID, st, h, recs)
	if len(h.held) == 0 {
		h.heldSince = time.Now()
		s.heldQ = append(s.heldQ, heldRef{flowID: flowID, h: h, since: h.heldSince})
	}
	h.held = append(h.held, recs...)
	return decision{recs: recs, runID: st.RunID, status: st.Status}, st
}

// against loads the flow's head state and decides cmd on it. done is true
// when the decision is final without records (the sequencer is broken, the
// load or the decision failed, or nothing changes): d is then the answer,
// with the run ID and status when the flow exists.
func (s *sequencer) against(flowID string, cmd engine.Command) (st *engine.FlowState, h *head, recs []engine.Record,
	d decision, done bool) {
	if s.broken != nil {
		return nil, nil, nil, decision{err: s.broken}, true
	}
	st, h, err := s.load(flowID)
	if err != nil {
		return nil, nil, nil, decision{err: err}, true
	}
	if recs, err = s.eng.Decide(st, cmd, time.Now()); err != nil {
		return st, h, nil, decision{err: err}, true
	}
	if len(recs) == 0 {
		if st != nil {
			d.runID, d.status = st.RunID, st.Status
		}
		return st, h, nil, d, true
	}
	return st, h, recs, decision{}, false
}

// advance applies recs to st, the head state of flowID, and stores the
// result in the flow's head, creating it when there is none.
func (s *sequencer) advance(flowID string, st *engine.FlowState, h *head, recs []engine.Record) (*engine.FlowState, *head) {
	for _, r := range recs {
		st, _ = engine.Apply(st, r)
	}
	if h == nil {
		h = &head{}
		s.heads[flowID] = h
	}
	h.st = st
	return st, h
}

// committed is posted by OnDurable after a batch was applied to the store:
// n envelopes of flowID are now committed.
func (s *sequencer) committed(flowID string, n int) {
	h := s.heads[flowID]
	if h == nil {
		return
	}
	h.inflight -= n
	if h.inflight <= 0 && len(h.held) == 0 {
		delete(s.heads, flowID)
	}
}

// forEachHead calls fn for every head state in memory.
func (s *sequencer) forEachHead(fn func(flowID string, st *engine.FlowState)) {
	for id, h := range s.heads {
		fn(id, h.st)
	}
}
