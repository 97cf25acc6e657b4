package serving

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
)

// Closing a run (NotifyClosed) drops its timers and queued tasks and wakes
// its WaitForFlow callers. These tests check that it touches that run
// only, that its cost does not grow with other runs' work (issue 11, item
// 4; BenchmarkRunClose measures a whole completion), and that WaitForFlow
// leaves nothing behind.

func waitTimer(flowID, runID string, idx int, at time.Time) engine.ArmTimer {
	return engine.ArmTimer{FlowID: flowID, RunID: runID, Timer: engine.Timer{Kind: engine.TimerWait, StepExecID: "S-1", Index: idx}, At: at}
}

// Covers: E20
func TestTimers_DropRunRemovesExactlyTheRunsTimers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := newTimerQueue(func(engine.ArmTimer) {})
	// Run f1/r1 has three timers; f1/r2 (another run of the flow) and
	// f2/r1 (the same run ID in another flow) two each. Fire times
	// interleave so that the runs' timers mix in the heap.
	for i := range 3 {
		q.arm(waitTimer("f1", "r1", i, t0.Add(time.Duration(3*i)*time.Second)))
	}
	for i := range 2 {
		q.arm(waitTimer("f1", "r2", i, t0.Add(time.Duration(3*i+1)*time.Second)))
		q.arm(waitTimer("f2", "r1", i, t0.Add(time.Duration(3*i+2)*time.Second)))
	}
	// Arming a timer again replaces its fire time: still one timer.
	q.arm(waitTimer("f1", "r1", 0, t0.Add(10*time.Second)))
	q.arm(waitTimer("f2", "r1", 1, t0.Add(3*time.Second)))
	if n := q.len(); n != 7 {
		t.Fatalf("%d timers armed, want 7", n)
	}
	q.dropRun("f1", "r1")
	q.dropRun("f3", "r1") // a run without timers: nothing changes
	if n := q.len(); n != 4 {
		t.Fatalf("%d timers left, want 4", n)
	}
	if _, ok := q.byRun[runKey{"f1", "r1"}]; ok || len(q.byRun) != 2 {
		t.Fatalf("index after the close: %v", q.byRun)
	}
	var got []string
	for q.h.Len() > 0 {
		a := heap.Pop(&q.h).(*timerEntry).arm
		got = append(got, fmt.Sprintf("%s/%s#%d@%v", a.FlowID, a.RunID, a.Timer.Index, a.At.Sub(t0)))
	}
	want := []string{"f1/r2#0@1s", "f2/r1#0@2s", "f2/r1#1@3s", "f1/r2#1@4s"}
	if !slices.Equal(got, want) {
		t.Fatalf("timers left, in fire order: %v, want %v", got, want)
	}
}

// A timer that fires leaves the index with its heap entry.
//
// Covers: E20
func TestTimers_FiredTimerLeavesTheIndex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var fired []engine.ArmTimer
		q := newTimerQueue(func(a engine.ArmTimer) {
			mu.Lock()
			fired = append(fired, a)
			mu.Unlock()
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { q.run(ctx); close(done) }()
		now := time.Now()
		q.arm(waitTimer("f1", "r1", 0, now.Add(time.Second)))
		q.arm(waitTimer("f1", "r1", 1, now.Add(time.Hour)))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		q.mu.Lock()
		left := q.byRun[runKey{"f1", "r1"}]
		q.mu.Unlock()
		if len(left) != 1 || left[0].arm.Timer.Index != 1 {
			t.Errorf("indexed after the first fired: %d timers", len(left))
		}
		q.dropRun("f1", "r1")
		if n := q.len(); n != 0 || len(q.byRun) != 0 {
			t.Errorf("after the close: %d timers, %d runs indexed", n, len(q.byRun))
		}
		cancel()
		<-done
		if len(fired) != 1 || fired[0].Timer.Index != 0 {
			t.Errorf("fired %v", fired)
		}
	})
}

// minDuration is the shortest of reps runs of f (each after its setup):
// the least disturbed measurement of f's own cost.
func minDuration(reps int, setup, f func()) time.Duration {
	best := time.Duration(1 << 62)
	for range reps {
		setup()
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0))
	}
	return best
}

// closeCostRatio fails t when dropping a run among many other runs' work
// costs far more than among a few. The old scans took about 1 ms at 100k
// (ratios in the thousands); an index costs a few log factors.
func closeCostRatio(t *testing.T, what string, small, large time.Duration) {
	t.Helper()
	t.Logf("%s: %v among few, %v among many", what, small, large)
	if large > 50*small && large > 50*time.Microsecond {
		t.Errorf("%s costs %v among 100k other runs' entries, %v among 10: it grows with unrelated work", what, large, small)
	}
}

// Closing a run costs the same among 10 and among 100,000 armed timers of
// other runs.
func TestTimers_DropRunCostDoesNotGrowWithOtherRuns(t *testing.T) {
	cost := func(others int) time.Duration {
		q := newTimerQueue(func(engine.ArmTimer) {})
		far := time.Now().Add(time.Hour)
		for i := range others {
			q.arm(waitTimer(fmt.Sprintf("other-%d", i), "r", 0, far.Add(time.Duration(i)*time.Millisecond)))
		}
		return minDuration(30, func() {
			q.arm(waitTimer("f", "r", 0, far.Add(time.Minute)))
			q.arm(waitTimer("f", "r", 1, far.Add(2*time.Minute)))
		}, func() { q.dropRun("f", "r") })
	}
	closeCostRatio(t, "timerQueue.dropRun", cost(10), cost(100_000))
}

// Closing a run costs the same among 10 and among 100,000 queued tasks of
// other runs, and so does the dispatcher's next pump when no worker can
// take the head of the queue (it used to copy the whole queue).
func TestDispatch_DropRunCostDoesNotGrowWithOtherRuns(t *testing.T) {
	cost := func(others int) time.Duration {
		c := NewCore(CoreConfig{Epoch: 1, Store: flowstore.NewMemStore()})
		d := c.disp
		for i := range others {
			d.enqueue(engine.TaskRef{FlowID: fmt.Sprintf("other-%d", i), RunID: "r", FlowType: "idle", StepExecID: "S-1", Method: engine.MethodExecute, Attempt: 1})
		}
		n := 0
		return minDuration(30, func() {
			n++
			d.enqueue(engine.TaskRef{FlowID: "f", RunID: fmt.Sprint(n), FlowType: "idle", StepExecID: "S-1", Method: engine.MethodExecute, Attempt: 1})
		}, func() {
			d.dropRun("f", fmt.Sprint(n))
			d.pump()
		})
	}
	closeCostRatio(t, "dispatcher.dropRun+pump", cost(10), cost(100_000))
}

// A pump costs the same with 10 and with 100,000 retries of other runs
// waiting for their NotBefore in a served flow type's queue: they wait
// apart, by NotBefore, and the pump does not look at them (it used to walk
// and copy all of them, on every completion).
func TestDispatch_PumpCostDoesNotGrowWithDelayedTasks(t *testing.T) {
	cost := func(delayed int) time.Duration {
		c := NewCore(CoreConfig{Epoch: 1, Store: flowstore.NewMemStore()})
		d := c.disp
		// A worker of the type with no free slot: the ready task at the
		// head waits, as in a busy system.
		d.sessions["s"] = &session{id: "s", types: map[string]bool{"a": true}, inflight: map[taskKey]time.Time{}}
		later := time.Now().Add(time.Hour)
		for i := range delayed {
			d.enqueue(engine.TaskRef{FlowID: fmt.Sprintf("other-%d", i), RunID: "r", FlowType: "a", StepExecID: "S-1",
				Method: engine.MethodExecute, Attempt: 2, NotBefore: later})
		}
		d.enqueue(engine.TaskRef{FlowID: "f", RunID: "r", FlowType: "a", StepExecID: "S-1", Method: engine.MethodExecute, Attempt: 1})
		return minDuration(30, func() {}, func() { d.pump() })
	}
	closeCostRatio(t, "dispatcher.pump", cost(10), cost(100_000))
}

// A retry waits for its NotBefore apart from its queue and is handed out
// once it has passed; closing its run before then forgets it.
//
// Covers: E9, E10, E23
func TestDispatch_DelayedRetryIsHandedOutWhenDueOrDroppedWithItsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		ctx := context.Background()
		s := h.session("w", 5, "a")
		h.start("f1", "a", "S")
		h.start("f2", "a", "S")
		synctest.Wait()
		after := 10 * time.Second
		for _, task := range tasks(s) {
			if a, err := s.Result(ctx, task.Token, engine.TaskFailed{Token: task.Token,
				Failure: engine.Failure{Type: "Boom"}, RetryAfter: &after}); err != nil || a.Status != server.AckAccepted {
				t.Fatalf("failure ack = %+v, %v", a, err)
			}
		}
		synctest.Wait()
		d := h.core.disp
		counts := func() (delayed, queue, queued int) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if w := d.waitingLocked("a"); w != len(d.queued) {
				t.Errorf("%d tasks counted waiting for admission, %d queued", w, len(d.queued))
			}
			return len(d.delayed), len(d.queues["a"]), len(d.queued)
		}
		if dl, q, qd := counts(); dl != 2 || q != 0 || qd != 2 {
			t.Fatalf("two retries not due: %d delayed, %d in the queue, %d queued", dl, q, qd)
		}
		if _, err := h.core.Command(ctx, "f1", engine.StopFlow{FlowID: "f1"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if dl, q, qd := counts(); dl != 1 || q != 0 || qd != 1 {
			t.Fatalf("after f1 closed: %d delayed, %d in the queue, %d queued", dl, q, qd)
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 || got[0].FlowID != "f2" || got[0].Attempt != 2 {
			t.Fatalf("after the backoff: %+v", got)
		}
		if dl, q, qd := counts(); dl != 0 || q != 0 || qd != 0 {
			t.Fatalf("after the hand-out: %d delayed, %d in the queue, %d queued", dl, q, qd)
		}
	})
}

// A closed run's queued tasks are dropped, the other runs' are handed out,
// also after the dropped ones were compacted away.
//
// Covers: W5, E23
func TestDispatch_DropRunForgetsExactlyTheRunsTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		ids := []string{"f1", "f2", "f3", "f4", "f5"}
		for _, id := range ids {
			h.start(id, "a", "S") // nobody serves "a" yet: the tasks wait
		}
		synctest.Wait()
		for _, id := range []string{"f2", "f4", "f5"} {
			if _, err := h.core.Command(context.Background(), id, engine.StopFlow{FlowID: id}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		d := h.core.disp
		d.mu.Lock()
		queued, runs, inQueue := len(d.queued), len(d.byRun), len(d.queues["a"])
		d.mu.Unlock()
		if n := d.queuedOf("a"); n != 2 {
			t.Fatalf("admission counts %d tasks waiting, want 2", n)
		}
		// Three of five dead: more than half, so the queue was compacted.
		if queued != 2 || runs != 2 || inQueue != 2 {
			t.Fatalf("after 3 of 5 runs closed: %d queued, %d runs indexed, %d in the queue", queued, runs, inQueue)
		}
		s := h.session("w", 10, "a")
		synctest.Wait()
		var got []string
		for _, task := range tasks(s) {
			got = append(got, task.FlowID)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"f1", "f3"}) {
			t.Fatalf("handed out %v, want [f1 f3]", got)
		}
		d.mu.Lock()
		queued, runs = len(d.queued), len(d.byRun)
		d.mu.Unlock()
		if queued != 0 || runs != 0 {
			t.Fatalf("after hand-out: %d queued, %d runs indexed", queued, runs)
		}
	})
}

// WaitForFlow on an unknown flow or on a closed one answers at once and
// leaves no waiter entry behind (it used to leave one per flow: 10,000
// calls on distinct unknown flows left 10,000 entries).
//
// Covers: E25
func TestWaitForFlow_UnknownAndClosedFlowsLeaveNoEntry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		ctx := context.Background()
		s := h.session("w", 10, "a")
		closed := []string{"c1", "c2", "c3"}
		for _, id := range closed {
			h.start(id, "a", "S")
		}
		synctest.Wait()
		for _, task := range tasks(s) {
			h.complete(s, task)
		}
		synctest.Wait()
		for i := range 10_000 {
			if _, err := h.core.WaitForFlow(ctx, fmt.Sprintf("unknown-%d", i), ""); engine.CodeOf(err) != engine.CodeNotFound {
				t.Fatalf("unknown flow: %v", err)
			}
			id := closed[i%len(closed)]
			if st, err := h.core.WaitForFlow(ctx, id, ""); err != nil || st.Status != engine.StatusCompleted {
				t.Fatalf("closed flow %s: %v", id, err)
			}
		}
		if n, held := h.core.waiters.len(); n != 0 || held != 0 {
			t.Fatalf("20,000 calls on unknown and closed flows left %d waiter entries (%d held)", n, held)
		}
	})
}

// WaitForFlow calls that wait are bounded: beyond the bound a call that
// would wait is refused as overload (RESOURCE_EXHAUSTED with a retry hint),
// one that need not wait is answered; calls that end (cancelled or woken) free their place and their
// entry.
//
// Covers: E25
func TestWaitForFlow_WaitersAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLimitedHarness(t, mem.New(), AdmissionLimits{MaxFlowWaiters: 3}) // limits.maxFlowWaiters
		defer h.stop()
		h.start("run1", "a", "S") // nobody serves "a": stays running
		h.start("run2", "a", "S")
		s := h.session("w", 10, "b")
		h.start("done", "b", "S")
		synctest.Wait()
		h.complete(s, tasks(s)[0])
		synctest.Wait()

		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 3)
		for _, id := range []string{"run1", "run1", "run2"} {
			go func() {
				_, err := h.core.WaitForFlow(ctx, id, "")
				errs <- err
			}()
		}
		synctest.Wait() // all three wait
		if n, _ := h.core.waiters.len(); n != 2 {
			t.Fatalf("3 calls on 2 flows wait on %d entries", n)
		}
		_, err := h.core.WaitForFlow(ctx, "run2", "")
		var oe *server.OverloadError
		if !errors.As(err, &oe) || oe.RetryAfter <= 0 {
			t.Fatalf("a fourth waiter: %v, want an overload refusal with a retry hint", err)
		}
		if st, err := h.core.WaitForFlow(ctx, "done", ""); err != nil || st.Status != engine.StatusCompleted {
			t.Fatalf("a closed flow at the bound: %v", err)
		}
		// A close wakes the waiter of run2; its place is free again.
		if _, err := h.core.Command(ctx, "run2", engine.StopFlow{FlowID: "run2"}); err != nil {
			t.Fatal(err)
		}
		if err := <-errs; err != nil {
			t.Fatalf("woken waiter: %v", err)
		}
		go func() {
			_, err := h.core.WaitForFlow(ctx, "run1", "")
			errs <- err
		}()
		synctest.Wait()
		if n, _ := h.core.waiters.len(); n != 1 {
			t.Fatalf("3 calls on run1 wait on %d entries", n)
		}
		cancel()
		for range 3 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled waiter: %v", err)
			}
		}
		if n, held := h.core.waiters.len(); n != 0 || held != 0 || h.core.waiters.waiting != 0 {
			t.Fatalf("after every call ended: %d entries, %d held, %d counted", n, held, h.core.waiters.waiting)
		}
	})
}
