package serving

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// Issue 10, item 3: after a crash, a worker resends the results of its
// previous epoch that were never acknowledged, and the new process
// re-dispatches an ASYNC attempt whose start was lost with the same
// attempt number (T3). Both name the same flow, run, step execution,
// method and attempt; only the epoch differs.

// crashWithLostAsyncStart runs epoch 1 of the timeline: a worker with one
// slot gets f1's ASYNC attempt 1, f2 starts and waits for the slot, and
// the process crashes at 1.5 s, before f1's attempt start is durable. It returns
// the epoch-1 task the worker ran.
func crashWithLostAsyncStart(t *testing.T, blobs *mem.Store) *engine.Task {
	t.Helper()
	h := newHarness(t, blobs, 1)
	s := h.session("w1", 1, "a")
	h.start("f1", "a", "Async") // durable; its task goes to w1, its start is held
	// Every batch takes 1 s to write from now on: f1's held start (written
	// from holdLimit on) cannot be durable before the crash at 1.5 s.
	blobs.SetFaults(func(op, key string) mem.Fault {
		if op == blob.OpPutIfAbsent {
			return mem.Fault{Latency: time.Second}
		}
		return mem.Fault{}
	})
	h.start("f2", "a", "Async") // durable at 1 s; w1 has no free slot
	synctest.Wait()
	got := tasks(s)
	if len(got) != 1 || got[0].FlowID != "f1" || got[0].Attempt != 1 {
		t.Fatalf("epoch 1: the worker got %v, want f1's attempt 1", got)
	}
	time.Sleep(500 * time.Millisecond)
	h.crash()
	blobs.SetFaults(nil)
	return got[0]
}

// staleResult is the worker resending its epoch-1 answer on its new stream.
func staleResult(t *testing.T, s server.Session, old *engine.Task) {
	t.Helper()
	a, err := s.Result(context.Background(), old.Token, engine.ExecuteResult{Token: old.Token,
		Decision: engine.Decision{Kind: engine.DecideGracefulComplete}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != server.AckStaleEpoch {
		t.Fatalf("the epoch-1 result was acked %v, want STALE_EPOCH", a.Status)
	}
}

// The stale result arrives while the re-dispatched attempt is reserved but
// not yet sent (its start waits on a busy sequencer). It must neither free
// that reservation nor cost the attempt its delivery: the task is sent at
// once and the flow goes on without waiting for the attempt timeout.
//
// Covers: T3, W2, W3
func TestDispatch_StaleEpochResultDoesNotFreeTheRedispatchedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		old := crashWithLostAsyncStart(t, blobs)

		h := newHarness(t, blobs, 2)
		defer h.stop()
		// The sequencer is busy (under load: many starts queued), so the
		// start of a reserved task runs a moment after the reservation.
		busy := make(chan struct{})
		h.core.seq.post(func() { <-busy })
		s := h.session("w1", 1, "a") // reserves f1's attempt 1 for epoch 2
		synctest.Wait()
		staleResult(t, s, old)
		synctest.Wait()
		close(busy)
		synctest.Wait()

		// The worker answers each task at once; both flows must be done
		// long before f1's 30 s attempt timeout.
		began := time.Now()
		seen := map[string]*engine.Task{}
		for len(seen) < 2 && time.Since(began) < 2*time.Second {
			for _, task := range tasks(s) {
				seen[task.FlowID] = task
				if a := h.complete(s, task); a.Status != server.AckAccepted {
					t.Fatalf("%s attempt %d acked %v (%s)", task.FlowID, task.Attempt, a.Status, a.Message)
				}
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		if task := seen["f1"]; task == nil || task.Attempt != 1 || task.Token.Epoch != 2 {
			st, _ := h.core.cfg.Store.Flow("f1")
			t.Fatalf("2 s after the worker reconnected f1 got task %+v (state %s, attempt %d %s); want its attempt 1 of epoch 2 (T3)",
				task, st.Status, st.Steps[0].Attempt.Number, st.Steps[0].Attempt.State)
		}
		if seen["f2"] == nil {
			t.Fatal("f2 got no task within 2 s")
		}
		for _, id := range []string{"f1", "f2"} {
			if st, _ := h.core.cfg.Store.Flow(id); st.Status != engine.StatusCompleted {
				t.Fatalf("%s: status %s, want COMPLETED", id, st.Status)
			}
		}
	})
}

// The stale result arrives after the re-dispatched attempt was sent: the
// worker still runs it, so its slot stays taken and a worker with one slot
// gets no second task.
//
// Covers: W1, W2
func TestDispatch_StaleEpochResultKeepsTheRunningAttemptsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		old := crashWithLostAsyncStart(t, blobs)

		h := newHarness(t, blobs, 2)
		defer h.stop()
		s := h.session("w1", 1, "a")
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 || got[0].FlowID != "f1" || got[0].Attempt != 1 {
			t.Fatalf("epoch 2: the worker got %v, want f1's attempt 1 again (T3)", got)
		}
		staleResult(t, s, old)
		synctest.Wait()
		if more := tasks(s); len(more) != 0 {
			t.Fatalf("a worker with one slot, still running f1, got %d more task(s) after its stale result (%s)", len(more), more[0].FlowID)
		}
		if a := h.complete(s, got[0]); a.Status != server.AckAccepted {
			t.Fatalf("f1 acked %v", a.Status)
		}
		synctest.Wait()
		if next := tasks(s); len(next) != 1 || next[0].FlowID != "f2" {
			t.Fatalf("after f1's result the worker got %v, want f2", next)
		}
	})
}

// A started task is never dropped while its worker is alive: when the
// session that reserved it ends before the task went out (the worker's
// stream broke and it reconnects), the task goes to the next session
// with a free slot at once, not after the attempt timeout.
//
// Covers: W3, W4
func TestDispatch_StartedTaskWaitsForTheReconnectedWorker(t *testing.T) {
	t.Run("session ended before the SYNC start was durable", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			blobs := mem.New()
			h := newHarness(t, blobs, 1)
			defer h.stop()
			s1 := h.session("w1", 1, "a")
			// Every write takes 1 s: f1 starts at 1 s, its SYNC attempt
			// start is written from 1 s to 2 s, and only then sent.
			blobs.SetFaults(func(op, key string) mem.Fault {
				if op == blob.OpPutIfAbsent {
					return mem.Fault{Latency: time.Second}
				}
				return mem.Fault{}
			})
			h.start("f1", "a", "Sync")
			synctest.Wait()
			if got := tasks(s1); len(got) != 0 {
				t.Fatalf("at 1 s w1 got %v before the SYNC start was durable", got)
			}
			s1.Close() // reserved f1, received nothing
			blobs.SetFaults(nil)
			time.Sleep(1500 * time.Millisecond) // the start is durable, no session
			synctest.Wait()
			s2 := h.session("w1", 1, "a")
			synctest.Wait()
			if got := tasks(s2); len(got) != 1 || got[0].FlowID != "f1" || got[0].Attempt != 1 {
				t.Fatalf("the reconnected worker got %v, want f1's attempt 1 at once", got)
			}
		})
	})
	t.Run("session ended with the task not taken", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, mem.New(), 1)
			defer h.stop()
			s1 := h.session("w1", 1, "a")
			h.start("f1", "a", "Async")
			synctest.Wait()
			s1.Close() // the stream ended before it sent the task
			s2 := h.session("w1", 1, "a")
			synctest.Wait()
			got := tasks(s2)
			if len(got) != 1 || got[0].FlowID != "f1" || got[0].Attempt != 1 {
				t.Fatalf("the reconnected worker got %v, want f1's attempt 1 at once", got)
			}
			if a := h.complete(s2, got[0]); a.Status != server.AckAccepted {
				t.Fatalf("f1 acked %v (%s)", a.Status, a.Message)
			}
		})
	})
}

// A started task handed back unsent (its session closed with the task
// still in its outbox) must not go out after its attempt timed out,
// counted from the attempt's start, not from the hand-back: the engine has
// failed that attempt by then and may run the next, and a worker would
// run the same step twice at once (found in review: the task was queued
// for the whole timeout again from the hand-back).
//
// Covers: W3
func TestDispatch_HandedBackTaskExpiresWithItsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		s1 := h.session("w1", 1, "a")
		h.start("f1", "a", "Sync")
		synctest.Wait() // attempt 1 started at 0 s, in s1's outbox, never taken
		time.Sleep(25 * time.Second)
		s1.Close() // handed back 5 s before the attempt's 30 s timeout
		synctest.Wait()
		time.Sleep(15 * time.Second) // 40 s: attempt 1 timed out at 30 s
		synctest.Wait()
		s2 := h.session("w2", 1, "a")
		synctest.Wait()
		for _, task := range tasks(s2) {
			if task.FlowID == "f1" && task.Attempt == 1 {
				t.Fatalf("at 40 s a worker got f1's attempt 1, which timed out at 30 s")
			}
		}
	})
}
