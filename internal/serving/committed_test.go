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

// A handler only ever observes committed state (W4): an ASYNC step task
// and an RPC task are built from the flow's committed state, never from
// the sequencer's head, which may hold attribute writes whose batch is
// still in flight. Such a write can be lost in a crash (its caller never
// got an answer); a handler that had seen it would have acted on a value
// that never became durable, and the rerun after the crash would see
// another. Sequence: attempt 2 of an ASYNC Execute comes due while a
// client's SetAttributes(x=2) is being written; an RPC is invoked at the
// same moment; both tasks must show x=1, the committed value, which is
// also what survives the crash that follows.
//
// Covers: W4, E21, E22, T3
func TestDispatch_TasksCarryCommittedStateOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		ctx := context.Background()
		def := &engine.FlowDefinition{Type: "attrs", Steps: map[string]engine.StepDef{
			"A": {Options: &engine.StepOptions{Execute: &engine.MethodOptions{Durability: engine.ASYNC}}},
		}, Attributes: []string{"x"}, RPCs: []string{"get"}}
		s, err := h.core.OpenSession(ctx, server.WorkerHello{WorkerID: "w1", MaxConcurrent: 5,
			FlowTypes: []server.FlowTypeDecl{{Definition: def}}})
		if err != nil {
			t.Fatal(err)
		}
		val := func(v string) engine.Value { return engine.Value{Type: ":", Data: []byte(v)} }
		if _, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: "f1", FlowType: "attrs", StartStep: "A",
			Attributes: []engine.AttributeWrite{{Name: "x", Value: val("1")}}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		first := tasks(s)
		if len(first) != 1 || first[0].Attempt != 1 {
			t.Fatalf("tasks after the start: %+v", first)
		}
		retry := 2 * time.Second
		if a, err := s.Result(ctx, first[0].Token, engine.TaskFailed{Token: first[0].Token,
			Failure: engine.Failure{Type: "Busy"}, RetryAfter: &retry}); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("fail attempt 1: %+v, %v", a, err)
		}
		began := time.Now() // attempt 2 is due at began+2s

		// From now on every batch takes 1 s to write.
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: time.Second}
			}
			return mem.Fault{}
		})
		time.Sleep(1500 * time.Millisecond)
		go func() { // written from 1.5 s to 2.5 s; lost in the crash at 2.2 s
			_, _ = h.core.Command(ctx, "f1", engine.SetAttributes{FlowID: "f1",
				Attributes: []engine.AttributeWrite{{Name: "x", Value: val("2")}}})
		}()
		time.Sleep(500 * time.Millisecond)
		go func() { // its task is sent at once; the call is never answered
			_, _ = h.core.InvokeRPC(ctx, engine.InvokeRPC{FlowID: "f1", Name: "get"}, time.Minute)
		}()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if d := time.Since(began); d != 2200*time.Millisecond {
			t.Fatalf("test clock at %v", d)
		}
		got := map[engine.Method]*engine.Task{}
		for _, task := range tasks(s) {
			got[task.Method] = task
		}
		for _, m := range []engine.Method{engine.MethodExecute, engine.MethodRPC} {
			task := got[m]
			if task == nil {
				t.Fatalf("no %s task at 2.2 s: %+v", m, got)
			}
			if x := string(task.Attributes["x"].Data); x != "1" {
				t.Errorf("%s task shows x=%s, whose write is not durable; want the committed x=1", m, x)
			}
		}
		h.crash()
		blobs.SetFaults(nil)

		h2 := newHarness(t, blobs, 2)
		defer h2.stop()
		st, err := h2.core.cfg.Store.Flow("f1")
		if err != nil || string(st.Attributes["x"].Data) != "1" {
			t.Fatalf("after the crash: x=%s (%v), want 1", st.Attributes["x"].Data, err)
		}
	})
}

// An RPC invoked while the run's start is still being written is checked
// against the head (the run exists) but sent only once the start is
// durable: before that the run may yet be lost.
//
// Covers: W4, E22
func TestInvokeRPC_WaitsForAStartInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		defer h.stop()
		ctx := context.Background()
		def := &engine.FlowDefinition{Type: "rpc", Steps: map[string]engine.StepDef{"A": {}}, RPCs: []string{"get"}}
		s, err := h.core.OpenSession(ctx, server.WorkerHello{WorkerID: "w1", MaxConcurrent: 5,
			FlowTypes: []server.FlowTypeDecl{{Definition: def}}})
		if err != nil {
			t.Fatal(err)
		}
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: time.Second}
			}
			return mem.Fault{}
		})
		defer blobs.SetFaults(nil)
		go func() {
			_, _ = h.core.StartFlow(ctx, engine.StartFlow{FlowID: "f1", FlowType: "rpc",
				Attributes: []engine.AttributeWrite{}})
		}()
		time.Sleep(100 * time.Millisecond)
		called := make(chan error, 1)
		go func() {
			_, err := h.core.InvokeRPC(ctx, engine.InvokeRPC{FlowID: "f1", Name: "get"}, 5*time.Second)
			called <- err
		}()
		time.Sleep(800 * time.Millisecond)
		synctest.Wait()
		if got := tasks(s); len(got) != 0 {
			t.Fatalf("at 0.9 s, before the start is durable: %+v, want no RPC task", got)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 || got[0].Method != engine.MethodRPC {
			t.Fatalf("at 1.1 s: %+v, want the RPC task", got)
		}
		s.RPCFailed(got[0].Token, engine.Failure{Type: "No"})
		if err := <-called; err == nil {
			t.Fatal("the RPC succeeded, want the worker's error")
		}
	})
}
