package serving

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// newLimitedHarness is newHarness (epoch 1) with admission limits.
func newLimitedHarness(t *testing.T, blobs *mem.Store, lim AdmissionLimits) *harness {
	t.Helper()
	return newHarnessWith(t, blobs, 1, lim)
}

// slowLog makes every log write take d.
func slowLog(blobs *mem.Store, d time.Duration) {
	blobs.SetFaults(func(op, key string) mem.Fault {
		if op == blob.OpPutIfAbsent && strings.Contains(key, "/log/") {
			return mem.Fault{Latency: d}
		}
		return mem.Fault{}
	})
}

// wantOverload checks that err is a refusal naming limit, with a hint.
func wantOverload(t *testing.T, err error, limit string) {
	t.Helper()
	var oe *server.OverloadError
	if !errors.As(err, &oe) {
		t.Fatalf("got %v, want a refusal naming %s", err, limit)
	}
	if oe.Limit != limit || oe.RetryAfter <= 0 {
		t.Fatalf("refusal names %q with hint %v, want %s with a positive hint", oe.Limit, oe.RetryAfter, limit)
	}
}

// Covers: E28
// At capacity a call asking for new work is refused before anything is
// decided, a worker's result is committed all the same, and once the calls
// in progress are answered new work is admitted again.
func TestAdmission_PendingRequestsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newLimitedHarness(t, blobs, AdmissionLimits{MaxPendingRequests: 2, MaxPendingBytes: 1 << 20, MaxQueuedTasks: 100})
		defer h.stop()
		s := h.session("w", 10, "a")
		h.start("f0", "a", "S")
		synctest.Wait()
		running := tasks(s)
		if len(running) != 1 {
			t.Fatalf("got %d tasks, want f0's", len(running))
		}

		slowLog(blobs, time.Second)
		start := func(id string) (chan error, error) {
			release, err := h.core.Admit(server.Work{Op: "StartFlow", FlowType: "a", Bytes: 100})
			if err != nil {
				return nil, err
			}
			done := make(chan error, 1)
			go func() {
				defer release()
				_, err := h.core.StartFlow(context.Background(), engine.StartFlow{FlowID: id, FlowType: "a", StartStep: "S"})
				done <- err
			}()
			return done, nil
		}
		d1, err1 := start("f1")
		d2, err2 := start("f2")
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("below the limit: %v", err)
		}
		synctest.Wait() // both wait for their log write
		_, err := start("f3")
		wantOverload(t, err, "limits.maxPendingRequests")

		// The result of f0's attempt is not new work: it is committed while
		// the limit is reached.
		acked := make(chan server.Ack, 1)
		go func() { acked <- h.complete(s, running[0]) }()

		if err := errors.Join(<-d1, <-d2); err != nil {
			t.Fatal(err)
		}
		if a := <-acked; a.Status != server.AckAccepted {
			t.Fatalf("f0's result: %+v, want accepted", a)
		}
		if st, err := h.core.Flow(context.Background(), "f0", ""); err != nil || st.Status != engine.StatusCompleted {
			t.Fatalf("f0: %v %v, want completed", st, err)
		}
		// f3 was refused before anything was decided: no run exists.
		if _, err := h.core.Flow(context.Background(), "f3", ""); engine.CodeOf(err) != engine.CodeNotFound {
			t.Fatalf("refused f3: %v, want not found", err)
		}
		// The calls were answered: room again.
		d3, err := start("f3")
		if err != nil {
			t.Fatalf("after the drain: %v", err)
		}
		if err := <-d3; err != nil {
			t.Fatal(err)
		}
	})
}

// Covers: E28
func TestAdmission_PendingBytesBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newLimitedHarness(t, blobs, AdmissionLimits{MaxPendingRequests: 100, MaxPendingBytes: 1 << 20, MaxQueuedTasks: 100})
		defer h.stop()
		// A call alone is admitted whatever its size.
		big, err := h.core.Admit(server.Work{Op: "SetAttributes", Bytes: 2 << 20})
		if err != nil {
			t.Fatalf("a call alone: %v", err)
		}
		_, err = h.core.Admit(server.Work{Op: "PublishToChannel", Bytes: 10})
		wantOverload(t, err, "limits.maxPendingBytes")
		big()
		big() // a second release changes nothing
		small, err := h.core.Admit(server.Work{Op: "PublishToChannel", Bytes: 600 << 10})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.core.Admit(server.Work{Op: "PublishToChannel", Bytes: 600 << 10})
		wantOverload(t, err, "limits.maxPendingBytes")
		small()
		if n, b := h.core.seq.pending(); n != 0 || b != 0 {
			t.Fatalf("after the releases: %d calls, %d bytes pending", n, b)
		}
	})
}

// Covers: E28, W5
// A flow type whose queue of tasks waiting for a worker is full refuses
// new starts; other types are not affected; a worker that takes the
// tasks makes room.
func TestAdmission_QueuedTasksBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLimitedHarness(t, mem.New(), AdmissionLimits{MaxPendingRequests: 100, MaxPendingBytes: 1 << 20, MaxQueuedTasks: 3})
		defer h.stop()
		for _, id := range []string{"f1", "f2", "f3"} {
			release, err := h.core.Admit(server.Work{Op: "StartFlow", FlowType: "a"})
			if err != nil {
				t.Fatal(err)
			}
			h.start(id, "a", "S")
			release()
		}
		synctest.Wait()
		_, err := h.core.Admit(server.Work{Op: "StartFlow", FlowType: "a"})
		wantOverload(t, err, "limits.maxQueuedTasks")
		release, err := h.core.Admit(server.Work{Op: "StartFlow", FlowType: "b"})
		if err != nil {
			t.Fatalf("another flow type: %v", err)
		}
		release()
		// Calls on running flows are not starts.
		release, err = h.core.Admit(server.Work{Op: "PublishToChannel"})
		if err != nil {
			t.Fatalf("a publish: %v", err)
		}
		release()
		s := h.session("w", 10, "a")
		synctest.Wait()
		if n := len(tasks(s)); n != 3 {
			t.Fatalf("the worker got %d tasks, want 3", n)
		}
		release, err = h.core.Admit(server.Work{Op: "StartFlow", FlowType: "a"})
		if err != nil {
			t.Fatalf("after a worker took the tasks: %v", err)
		}
		release()
	})
}

// Covers: E28
// New work is refused while the log writer's queue holds MaxPendingBytes,
// whoever put it there (wal's tests check QueuedBytes itself).
func TestAdmission_WriterQueueBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLimitedHarness(t, mem.New(), AdmissionLimits{MaxPendingRequests: 100, MaxPendingBytes: 1 << 20, MaxQueuedTasks: 100})
		defer h.stop()
		var queued atomic.Int64
		h.core.seq.queued = queued.Load
		queued.Store(1 << 20)
		_, err := h.core.Admit(server.Work{Op: "StartFlow", FlowType: "a"})
		wantOverload(t, err, "limits.maxPendingBytes")
		queued.Store(1<<20 - 1)
		release, err := h.core.Admit(server.Work{Op: "StartFlow", FlowType: "a"})
		if err != nil {
			t.Fatalf("below the limit: %v", err)
		}
		release()
	})
}
