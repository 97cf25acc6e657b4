package serving

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// timerQueue is the timer wheel: a heap of armed durable timers (flow
// timeouts, wait timers, attempt timeouts) ordered by fire time. ArmTimer
// effects and recovery arm them; when one is due the queue calls fire,
// which submits TimerFired. Timers that are already due when armed fire at
// once (E20, T5). Arming a timer again replaces its fire time.
//
// Timers are indexed by run, so that closing a run (dropRun, on the
// acknowledgement path) costs O(k log n) for the run's k timers among n
// armed ones, not a scan of all n.
type timerQueue struct {
	fire func(engine.ArmTimer)

	mu    sync.Mutex
	h     timerHeap
	byRun map[runKey][]*timerEntry // a run has a few timers: a slice is enough
	wake  chan struct{}
}

// runKey names one run of a flow.
type runKey struct{ flowID, runID string }

type timerEntry struct {
	arm   engine.ArmTimer
	index int
}

type timerHeap []*timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].arm.At.Before(h[j].arm.At) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	e := x.(*timerEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

func newTimerQueue(fire func(engine.ArmTimer)) *timerQueue {
	return &timerQueue{fire: fire, byRun: map[runKey][]*timerEntry{}, wake: make(chan struct{}, 1)}
}

func (q *timerQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// arm adds or re-arms a timer.
func (q *timerQueue) arm(a engine.ArmTimer) {
	k := runKey{a.FlowID, a.RunID}
	q.mu.Lock()
	if e := q.find(k, a.Timer); e != nil {
		e.arm = a
		heap.Fix(&q.h, e.index)
	} else {
		e := &timerEntry{arm: a}
		q.byRun[k] = append(q.byRun[k], e)
		heap.Push(&q.h, e)
	}
	q.mu.Unlock()
	q.signal()
}

// find returns the armed timer t of run k, nil if none (q.mu held).
func (q *timerQueue) find(k runKey, t engine.Timer) *timerEntry {
	for _, e := range q.byRun[k] {
		if e.arm.Timer == t {
			return e
		}
	}
	return nil
}

// unindex removes e from its run's index (q.mu held).
func (q *timerQueue) unindex(e *timerEntry) {
	k := runKey{e.arm.FlowID, e.arm.RunID}
	es := q.byRun[k]
	for i, o := range es {
		if o == e {
			es[i] = es[len(es)-1]
			es[len(es)-1] = nil
			es = es[:len(es)-1]
			break
		}
	}
	if len(es) == 0 {
		delete(q.byRun, k)
	} else {
		q.byRun[k] = es
	}
}

// dropRun removes every timer of a closed run: O(k log n) for its k timers.
func (q *timerQueue) dropRun(flowID, runID string) {
	k := runKey{flowID, runID}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.byRun[k] {
		heap.Remove(&q.h, e.index)
	}
	delete(q.byRun, k)
}

// len returns the number of armed timers.
func (q *timerQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.h.Len()
}

// run fires due timers until ctx ends.
func (q *timerQueue) run(ctx context.Context) {
	for {
		q.mu.Lock()
		now := time.Now()
		var due []engine.ArmTimer
		for q.h.Len() > 0 && !q.h[0].arm.At.After(now) {
			e := heap.Pop(&q.h).(*timerEntry)
			q.unindex(e)
			due = append(due, e.arm)
		}
		var wait time.Duration = -1
		if q.h.Len() > 0 {
			wait = q.h[0].arm.At.Sub(now)
		}
		q.mu.Unlock()
		for _, a := range due {
			q.fire(a)
		}
		var t *time.Timer
		var c <-chan time.Time
		if wait >= 0 {
			t = time.NewTimer(wait)
			c = t.C
		}
		select {
		case <-q.wake:
		case <-c:
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
