package serving

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// The dispatcher hands pending tasks to workers (W1-W5).
//
//   - Pending step tasks (DispatchTask effects, and PendingTasks after a
//     restart) wait until their NotBefore has passed (in delayed, a heap by
//     NotBefore, so that a pump does not look at retries that are not due),
//     then in a FIFO queue per flow type until a session serving the type
//     has a free slot. Tasks for a type nobody serves just wait (W5); they
//     stay visible in live state because the attempt is PENDING in the
//     flow's state.
//   - A task is reserved for exactly one session (W3): the slot is taken
//     before the start is decided, so no second session can get it.
//   - SYNC: the sequencer decides TaskStarted and submits it; the task is
//     sent when its start is durable (SendTask effect). ASYNC (the default
//     for methods without a recovery path): the sequencer decides
//     TaskStarted and holds its records, the task is built from the head
//     state and sent at once, and the start is logged in front of the
//     flow's next envelope, normally the task's result (W4, T3).
//   - A slot is freed when the worker sends the task's result or failure,
//     when the session ends, or when the reservation's deadline (the
//     attempt timeout plus a grace) passes.
//   - A started task no worker received is never dropped: when the
//     session that reserved it has ended by the time it is sent (SYNC: its
//     start became durable meanwhile), or the session ended with the task
//     still in its outbox, it waits at the front of its queue and goes to
//     the next session with a free slot, typically the same worker
//     reconnected, until its attempt timeout has passed. A task that went
//     out on a stream that then broke may be running: it times out (W3).
//   - RPC tasks wait in the same queues and take a slot the same way; they
//     are not logged (E22).
//   - Closing a run drops its queued step tasks in O(k) for its k tasks
//     (byRun), whatever else waits: they are marked dead and left in their
//     queue, which pump or, once they are half of it, compact removes.
//     pump does not copy a queue it cannot serve from (no free slot).
type dispatcher struct {
	c *Core

	mu     sync.Mutex
	queues map[string][]*pendingTask // by flow type, FIFO
	queued map[taskKey]*pendingTask
	byRun  map[runKey][]*pendingTask // the queued step tasks of each run
	dead   map[string]int            // dead tasks still in queues[flowType]
	// delayed holds the queued step tasks whose NotBefore had not passed
	// when they were queued; pump moves them to their queue when it has.
	delayed   delayHeap
	delayedBy map[string]int // len(delayed) by flow type
	nextSeq   uint64         // orders delayed tasks of the same NotBefore
	sessions  map[string]*session
	running   map[taskKey]*session // reserved or handed out
	draining  bool
	closed    bool
	idle      chan struct{} // closed and replaced whenever a slot is freed

	wake chan struct{}
}

// taskKey names one task as handed out: an attempt (or an RPC call) and
// the epoch whose token it carries. The epoch is part of the key because
// an ASYNC attempt whose start a crash lost runs again with the same
// number (T3): the worker's answer from the earlier epoch, resent on its
// new stream, names the same attempt and must not free, extend or name
// the slot of the task this epoch handed out.
type taskKey struct {
	epoch                     uint64
	flowID, runID, stepExecID string
	method                    engine.Method
	attempt                   int
	callID                    string
}

// refKey is the key of a pending attempt handed out in epoch.
func refKey(epoch uint64, r engine.TaskRef) taskKey {
	return taskKey{epoch: epoch, flowID: r.FlowID, runID: r.RunID, stepExecID: r.StepExecID, method: r.Method, attempt: r.Attempt}
}

func tokKey(t engine.Token) taskKey {
	if t.Method == engine.MethodRPC {
		return taskKey{epoch: t.Epoch, flowID: t.FlowID, runID: t.RunID, method: t.Method, callID: t.CallID}
	}
	return taskKey{epoch: t.Epoch, flowID: t.FlowID, runID: t.RunID, stepExecID: t.StepExecID, method: t.Method, attempt: t.Attempt}
}

type pendingTask struct {
	key      taskKey
	flowType string
	ref      engine.TaskRef // step tasks not started yet
	rpc      *rpcCall       // RPC tasks
	dead     bool           // its run closed

	// started is a step task whose start is decided but that no worker
	// received: it goes out as it is, to the next free slot, until its
	// attempt has timed out (until; zero: no attempt timeout).
	started *engine.Task
	until   time.Time

	// delayIdx is the task's index in dispatcher.delayed, -1 when it is
	// not there; seq orders it there among tasks of the same NotBefore.
	delayIdx int
	seq      uint64
}

// delayHeap orders step tasks by NotBefore, then by when they were queued.
type delayHeap []*pendingTask

func (h delayHeap) Len() int { return len(h) }
func (h delayHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if !a.ref.NotBefore.Equal(b.ref.NotBefore) {
		return a.ref.NotBefore.Before(b.ref.NotBefore)
	}
	return a.seq < b.seq
}
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].delayIdx, h[j].delayIdx = i, j
}
func (h *delayHeap) Push(x any) {
	p := x.(*pendingTask)
	p.delayIdx = len(*h)
	*h = append(*h, p)
}
func (h *delayHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.delayIdx = -1
	return p
}

const (
	// reserveGrace is added to an attempt's timeout for its slot.
	reserveGrace = 5 * time.Second
	// startDeadline bounds a slot whose start is not decided yet.
	startDeadline = time.Minute
)

func newDispatcher(c *Core) *dispatcher {
	return &dispatcher{
		c: c, queues: map[string][]*pendingTask{}, queued: map[taskKey]*pendingTask{},
		byRun: map[runKey][]*pendingTask{}, dead: map[string]int{}, delayedBy: map[string]int{},
		sessions: map[string]*session{}, running: map[taskKey]*session{},
		idle: make(chan struct{}), wake: make(chan struct{}, 1),
	}
}

func (d *dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run pumps the queues whenever something changed or a NotBefore passes.
func (d *dispatcher) run(ctx context.Context) {
	for {
		next := d.pump()
		var t *time.Timer
		var timer <-chan time.Time
		if !next.IsZero() {
			t = time.NewTimer(max(time.Until(next), 0))
			timer = t.C
		}
		select {
		case <-d.wake:
		case <-timer:
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

// enqueue adds a pending step task, once.
func (d *dispatcher) enqueue(r engine.TaskRef) {
	k := refKey(d.c.cfg.Epoch, r)
	d.mu.Lock()
	if _, ok := d.queued[k]; !ok && d.running[k] == nil {
		d.nextSeq++
		p := &pendingTask{key: k, flowType: r.FlowType, ref: r, delayIdx: -1, seq: d.nextSeq}
		d.queue(p)
		if r.NotBefore.After(time.Now()) {
			heap.Push(&d.delayed, p)
			d.delayedBy[p.flowType]++
		} else {
			d.queues[r.FlowType] = append(d.queues[r.FlowType], p)
		}
	}
	d.mu.Unlock()
	d.signal()
}

// enqueueRPC adds an RPC task at the front of its flow type's queue: a
// caller is waiting for it.
func (d *dispatcher) enqueueRPC(rc *rpcCall) {
	k := tokKey(rc.task.Token)
	d.mu.Lock()
	p := &pendingTask{key: k, flowType: rc.task.FlowType, rpc: rc, delayIdx: -1}
	d.queue(p)
	d.queues[p.flowType] = append([]*pendingTask{p}, d.queues[p.flowType]...)
	d.mu.Unlock()
	d.signal()
}

// queue registers p as queued (d.mu held); the caller puts it in its
// flow type's queue.
func (d *dispatcher) queue(p *pendingTask) {
	d.unqueue(p.key) // an RPC call queued again replaces its entry
	d.queued[p.key] = p
	if p.rpc == nil {
		rk := runKey{p.key.flowID, p.key.runID}
		d.byRun[rk] = append(d.byRun[rk], p)
	}
}

// unqueue forgets the queued task k (d.mu held); its queue entry, if any,
// is the caller's.
func (d *dispatcher) unqueue(k taskKey) {
	p, ok := d.queued[k]
	if !ok {
		return
	}
	delete(d.queued, k)
	if p.rpc != nil {
		return
	}
	rk := runKey{k.flowID, k.runID}
	ps := d.byRun[rk]
	for i, o := range ps {
		if o == p {
			ps = slices.Delete(ps, i, i+1)
			break
		}
	}
	if len(ps) == 0 {
		delete(d.byRun, rk)
	} else {
		d.byRun[rk] = ps
	}
}

// dropRun forgets the queued step tasks of a closed run: O(k) for its k
// tasks, amortised (see compact).
func (d *dispatcher) dropRun(flowID, runID string) {
	rk := runKey{flowID, runID}
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := d.byRun[rk]
	delete(d.byRun, rk)
	for _, p := range ps {
		delete(d.queued, p.key)
		p.dead = true
		if p.delayIdx >= 0 { // not in its queue yet
			heap.Remove(&d.delayed, p.delayIdx)
			d.undelayed(p.flowType)
			continue
		}
		d.dead[p.flowType]++
		if d.dead[p.flowType] > len(d.queues[p.flowType])/2 {
			d.compact(p.flowType)
		}
	}
}

// undelayed counts a task of flowType out of delayed (d.mu held).
func (d *dispatcher) undelayed(flowType string) {
	if d.delayedBy[flowType]--; d.delayedBy[flowType] == 0 {
		delete(d.delayedBy, flowType)
	}
}

// waitingLocked is the number of tasks of flowType waiting for a worker:
// those in its queue, less the dead ones still there, and those waiting
// for their NotBefore (d.mu held).
func (d *dispatcher) waitingLocked(flowType string) int {
	return len(d.queues[flowType]) - d.dead[flowType] + d.delayedBy[flowType]
}

// compact removes the dead tasks from a flow type's queue (d.mu held). It
// runs once they are half of it, so each dead task costs O(1) amortised,
// also in a queue no worker serves, which pump leaves alone.
func (d *dispatcher) compact(flowType string) {
	q := slices.DeleteFunc(d.queues[flowType], func(p *pendingTask) bool { return p.dead })
	if len(q) == 0 {
		delete(d.queues, flowType)
	} else {
		d.queues[flowType] = q
	}
	delete(d.dead, flowType)
}

// pump hands out what it can and returns when to look again (zero: only
// when something changes).
func (d *dispatcher) pump() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining || d.closed || !d.c.leaseValid() {
		return time.Time{}
	}
	now := time.Now()
	d.expire(now)
	for len(d.delayed) > 0 && !d.delayed[0].ref.NotBefore.After(now) {
		p := heap.Pop(&d.delayed).(*pendingTask)
		d.undelayed(p.flowType)
		d.queues[p.flowType] = append(d.queues[p.flowType], p)
	}
	var next time.Time
	if len(d.delayed) > 0 {
		next = d.delayed[0].ref.NotBefore
	}
	for ft, q := range d.queues {
		var keep []*pendingTask // the tasks of q[:i] that stay, in order
		rest := len(q)          // q[rest:] stays as it is
		for i, p := range q {
			switch {
			case p.dead:
				d.dead[ft]--
				continue
			case p.rpc != nil && p.rpc.canceled.Load(),
				p.started != nil && !p.until.IsZero() && now.After(p.until):
				d.unqueue(p.key)
				continue
			case p.rpc == nil && p.started == nil && p.ref.NotBefore.After(now):
				if next.IsZero() || p.ref.NotBefore.Before(next) {
					next = p.ref.NotBefore
				}
				keep = append(keep, p)
				continue
			}
			s := d.pick(ft)
			if s == nil {
				rest = i
				break
			}
			d.unqueue(p.key)
			d.running[p.key] = s
			s.inflight[p.key] = now.Add(startDeadline)
			d.start(p, s, now)
		}
		// The queue is now keep + q[rest:]. Without copying q[rest:]: the
		// tasks kept go just in front of it (q[:rest] is looked at already),
		// so a pump that cannot hand out the head of a long queue costs
		// O(1) for it, not O(len).
		from := rest - len(keep)
		copy(q[from:rest], keep)
		clear(q[:from])
		if q = q[from:]; len(q) == 0 {
			delete(d.queues, ft)
			delete(d.dead, ft)
		} else {
			d.queues[ft] = q
		}
	}
	return next
}

// pick returns the session serving flowType with the most free slots.
func (d *dispatcher) pick(flowType string) *session {
	var best *session
	bestFree := 0
	for _, s := range d.sessions {
		if !s.types[flowType] || s.closed {
			continue
		}
		if free := s.max - len(s.inflight); free > bestFree {
			best, bestFree = s, free
		}
	}
	return best
}

// expire frees the slots whose deadline passed.
func (d *dispatcher) expire(now time.Time) {
	for _, s := range d.sessions {
		for k, dl := range s.inflight {
			if now.After(dl) {
				delete(s.inflight, k)
				s.mu.Lock()
				s.forget(k)
				s.mu.Unlock()
				if d.running[k] == s {
					delete(d.running, k)
				}
			}
		}
	}
}

// start hands a reserved task on (d.mu held).
func (d *dispatcher) start(p *pendingTask, s *session, now time.Time) {
	if task := p.started; task != nil {
		s.inflight[p.key] = now.Add(task.Timeout + reserveGrace)
		s.push(server.Outgoing{Task: task, Until: p.until})
		return
	}
	if rc := p.rpc; rc != nil {
		rc.startedAt = now
		s.inflight[p.key] = now.Add(rc.timeout + reserveGrace)
		task := rc.task
		s.push(server.Outgoing{Task: &task})
		return
	}
	r := p.ref
	tok := engine.Token{Epoch: d.c.cfg.Epoch, FlowID: r.FlowID, RunID: r.RunID, StepExecID: r.StepExecID, Method: r.Method, Attempt: r.Attempt}
	async := r.Durability == engine.ASYNC
	seq := d.c.seq
	seq.post(func() {
		if d.noWaitFor(tok, r.StepType) {
			return
		}
		var dec decision
		var st *engine.FlowState
		if async {
			// Logged in front of the flow's next envelope, normally the
			// task's result (sequencer.hold).
			dec, st = seq.hold(tok.FlowID, engine.TaskStarted{Token: tok, Async: true})
		} else {
			dec, st = seq.decide(tok.FlowID, engine.TaskStarted{Token: tok})
		}
		if dec.err != nil {
			d.startFailed(p, dec.err)
			return
		}
		if async {
			// The task shows committed state only (W4): with changes of
			// the flow still in flight, it is built from the local store's
			// state, where the attempt is the same one, still PENDING.
			if cst, _, ok, err := seq.committedState(tok.FlowID); err != nil {
				d.release(p.key)
				return
			} else if ok {
				st = cst
			}
			task, err := st.Task(tok)
			if err != nil {
				d.release(p.key)
				return
			}
			d.sendStarted(tok, task)
		}
	})
}

// noWaitFor answers a WaitFor attempt on the worker's behalf when the run's
// definition says the step has none: a run started before any worker
// registered its type gives every step a WaitFor, and a worker answers
// "no wait" for a step without one (the engine's contract). Doing it here
// spares the worker a task it has no handler for. It runs on the sequencer
// and reports whether it handled the attempt (the slot is freed then).
func (d *dispatcher) noWaitFor(tok engine.Token, stepType string) bool {
	if tok.Method != engine.MethodWaitFor {
		return false
	}
	st, err := d.c.seq.peek(tok.FlowID)
	if err != nil || st == nil || st.Definition == nil {
		return false
	}
	if sd, ok := st.Definition.Steps[stepType]; !ok || sd.HasWaitFor {
		return false
	}
	defer d.release(tokKey(tok))
	// Held as an ASYNC start, which has no SendTask effect (nothing is sent
	// to a worker); it is logged with the answer, in one envelope.
	if dec, _ := d.c.seq.hold(tok.FlowID, engine.TaskStarted{Token: tok, Async: true}); dec.err != nil {
		return true // stale or not due: a later DispatchTask brings it back
	}
	if dec, _ := d.c.seq.decide(tok.FlowID, engine.WaitForResult{Token: tok}); dec.err != nil {
		d.c.log.Warn("WaitFor not answered for a step without one", "flowId", tok.FlowID, "stepExecId", tok.StepExecID, "err", dec.err)
	}
	return true
}

// startFailed undoes a reservation whose TaskStarted the engine refused: a
// stale attempt is dropped, one that is not due yet waits again.
func (d *dispatcher) startFailed(p *pendingTask, err error) {
	d.release(p.key)
	if errors.Is(err, engine.ErrStaleToken) || engine.CodeOf(err) == engine.CodeNotFound || errors.Is(err, server.ErrNotServing) {
		return
	}
	if errors.Is(err, engine.ErrLockHeld) {
		return // E30: the release of the lock dispatches it again
	}
	if engine.CodeOf(err) == engine.CodeFailedPrecondition {
		d.enqueue(p.ref)
		return
	}
	d.c.log.Warn("task not started", "flowId", p.ref.FlowID, "stepExecId", p.ref.StepExecID, "err", err)
}

// sendStarted sends a started task to the session that reserved it, or to
// another session with a free slot if that one is gone (the first never
// received it). Without one it waits for the next free slot (requeue).
func (d *dispatcher) sendStarted(tok engine.Token, task engine.Task) {
	k := tokKey(tok)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.c.leaseValid() || d.draining || d.closed {
		// L15: no new task once the lease is not valid; none after a Drain
		// notice either. The attempt's start is durable: it times out, or
		// the next process fails it with NOT_COMPLETED (T2).
		d.releaseLocked(k)
		return
	}
	var until time.Time // the attempt's time-out: it started just now
	if task.Timeout > 0 {
		until = time.Now().Add(task.Timeout)
	}
	d.sendStartedLocked(k, task, until)
}

// sendStartedLocked sends a started task whose attempt times out at until
// (zero: never) to the session that reserved it or to another one with a
// free slot; without one it waits for the next free slot (requeue).
func (d *dispatcher) sendStartedLocked(k taskKey, task engine.Task, until time.Time) {
	s := d.running[k]
	if s == nil || s.closed {
		if s = d.pick(task.FlowType); s == nil {
			delete(d.running, k)
			d.requeueLocked(k, task, until)
			return
		}
		d.running[k] = s
	}
	s.inflight[k] = time.Now().Add(task.Timeout + reserveGrace)
	s.push(server.Outgoing{Task: &task, Until: until})
}

// requeueLocked puts a started task that no worker received at the front
// of its queue (d.mu held).
//
// until is when the attempt times out, counted from its start, not from
// the requeue: past it the engine has failed the attempt (and may have
// started the next one), so the task must not go out any more; a worker
// running it then would run a step the engine no longer waits for, beside
// its retry (found in review).
func (d *dispatcher) requeueLocked(k taskKey, task engine.Task, until time.Time) {
	if _, ok := d.queued[k]; ok || d.running[k] != nil {
		return
	}
	p := &pendingTask{key: k, flowType: task.FlowType, started: &task, until: until, delayIdx: -1}
	d.queue(p)
	d.queues[p.flowType] = append([]*pendingTask{p}, d.queues[p.flowType]...)
	d.signal()
}

// resend hands the tasks a session never sent (they were still in its
// outbox when it closed) to the next free slot: a started step task waits
// in its queue, an RPC call whose caller still waits is queued again.
func (d *dispatcher) resend(unsent []server.Outgoing) {
	for _, m := range unsent {
		task := m.Task
		if task == nil {
			continue
		}
		if task.Token.Method == engine.MethodRPC {
			if rc := d.c.rpcs.get(task.Token.CallID); rc != nil && !rc.canceled.Load() {
				d.enqueueRPC(rc)
			}
			continue
		}
		d.mu.Lock()
		d.requeueLocked(tokKey(task.Token), *task, m.Until)
		d.mu.Unlock()
	}
}

// release frees a task's slot.
func (d *dispatcher) release(k taskKey) {
	d.mu.Lock()
	d.releaseLocked(k)
	d.mu.Unlock()
	d.signal()
}

func (d *dispatcher) releaseLocked(k taskKey) {
	if s := d.running[k]; s != nil {
		delete(s.inflight, k)
		delete(d.running, k)
		d.freed()
	}
}

// finished frees the slot of a task whose result s sent.
func (d *dispatcher) finished(s *session, k taskKey) {
	s.mu.Lock()
	s.forget(k)
	s.mu.Unlock()
	d.mu.Lock()
	if _, ok := s.inflight[k]; ok {
		delete(s.inflight, k)
		d.freed()
	}
	if d.running[k] == s {
		delete(d.running, k)
	}
	d.mu.Unlock()
	d.signal()
}

func (d *dispatcher) freed() {
	close(d.idle)
	d.idle = make(chan struct{})
}

// add registers a session.
func (d *dispatcher) add(s *session) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining || d.closed {
		return server.ErrNotServing
	}
	d.sessions[s.id] = s
	d.signal()
	return nil
}

// remove unregisters a session; its running tasks time out (W3).
func (d *dispatcher) remove(s *session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions[s.id] != s {
		return
	}
	delete(d.sessions, s.id)
	for k := range s.inflight {
		if d.running[k] == s {
			delete(d.running, k)
		}
	}
	if len(s.inflight) > 0 {
		d.freed()
	}
	clear(s.inflight)
	d.signal()
}

// drain stops handing out tasks and tells every session.
func (d *dispatcher) drain(msg server.Drain) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return
	}
	d.draining = true
	for _, s := range d.sessions {
		s.push(server.Outgoing{Drain: &msg})
	}
}

// waitIdle waits until no session has a task outstanding.
func (d *dispatcher) waitIdle(ctx context.Context) error {
	for {
		d.mu.Lock()
		n := 0
		for _, s := range d.sessions {
			n += len(s.inflight)
		}
		idle := d.idle
		d.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeAll ends every session.
func (d *dispatcher) closeAll() {
	d.mu.Lock()
	d.closed = true
	ss := make([]*session, 0, len(d.sessions))
	for _, s := range d.sessions {
		ss = append(ss, s)
	}
	d.mu.Unlock()
	for _, s := range ss {
		s.end()
	}
}

// WorkerOf implements server.TaskInfo.
func (d *dispatcher) WorkerOf(tok engine.Token) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.running[tokKey(tok)]; s != nil {
		return s.workerID
	}
	return ""
}

// HasWorker implements server.TaskInfo.
func (d *dispatcher) HasWorker(flowType string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(mapValues(d.sessions), func(s *session) bool { return s.types[flowType] })
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
