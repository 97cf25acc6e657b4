package node

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
type timerQueue struct {
	clock Clock
	fire  func(engine.ArmTimer)

	mu    sync.Mutex
	h     timerHeap
	byKey map[timerKey]*timerEntry
	wake  chan struct{}
}

type timerKey struct {
	flowID, runID string
	timer         engine.Timer
}

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

func newTimerQueue(clock Clock, fire func(engine.ArmTimer)) *timerQueue {
	return &timerQueue{clock: clock, fire: fire, byKey: map[timerKey]*timerEntry{}, wake: make(chan struct{}, 1)}
}

func (q *timerQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// arm adds or re-arms a timer.
func (q *timerQueue) arm(a engine.ArmTimer) {
	k := timerKey{a.FlowID, a.RunID, a.Timer}
	q.mu.Lock()
	if e, ok := q.byKey[k]; ok {
		e.arm = a
		heap.Fix(&q.h, e.index)
	} else {
		e := &timerEntry{arm: a}
		q.byKey[k] = e
		heap.Push(&q.h, e)
	}
	q.mu.Unlock()
	q.signal()
}

// dropRun removes every timer of a closed run.
func (q *timerQueue) dropRun(flowID, runID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, e := range q.byKey {
		if k.flowID == flowID && k.runID == runID {
			heap.Remove(&q.h, e.index)
			delete(q.byKey, k)
		}
	}
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
		now := q.clock.Now()
		var due []engine.ArmTimer
		for q.h.Len() > 0 && !q.h[0].arm.At.After(now) {
			e := heap.Pop(&q.h).(*timerEntry)
			delete(q.byKey, timerKey{e.arm.FlowID, e.arm.RunID, e.arm.Timer})
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
		var t Timer
		var c <-chan time.Time
		if wait >= 0 {
			t = q.clock.NewTimer(wait)
			c = t.C()
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
