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

// Adversarial review of issue 14: a client's ContinueAsNew(r1, k1) is
// decided and its envelope is in flight; its reply is lost and the SDK
// sends it again at once. Before that retry arrives, the new run
// r1.continued-1 continues again on the head: the worker of the attempt
// that was running at the switch (carried, its token naming r1) answers
// with a decision that continues as new. The retry meets a head whose
// latest run (r1.continued-2) is not the one k1 made, so the engine
// refuses it, and Core.retriedRun reads r1 from the committed store,
// where k1's envelope has not landed yet: the client is told NOT_FOUND
// for a continue-as-new that commits a moment later.
//
// Covers: E37
func TestContinueAsNew_RetryWhileTheFirstIsInFlightAndTheNewRunMovedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		defer h.stop()
		ctx := context.Background()
		def := &engine.FlowDefinition{Type: "c", Steps: map[string]engine.StepDef{"A": {}, "B": {}}}
		s, err := h.core.OpenSession(ctx, server.WorkerHello{WorkerID: "w1", MaxConcurrent: 5,
			FlowTypes: []server.FlowTypeDecl{{Definition: def}}})
		if err != nil {
			t.Fatal(err)
		}
		run, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: "f1", FlowType: "c", StartStep: "A"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 {
			t.Fatalf("tasks: %+v, want A's", got)
		}
		tok := got[0].Token

		// Every log write now takes 1 s.
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: time.Second}
			}
			return mem.Fault{}
		})
		first := make(chan error, 1)
		go func() { // its reply is lost: nobody reads the answer but the test
			_, err := h.core.Command(ctx, "f1", engine.ContinueAsNew{FlowID: "f1", RunID: run.RunID, RequestID: "k1"})
			first <- err
		}()
		time.Sleep(100 * time.Millisecond)
		decided := make(chan error, 1)
		go func() { // the carried attempt's decision continues the new run again
			_, err := s.Result(ctx, tok, engine.ExecuteResult{Token: tok, Decision: engine.Decision{Kind: engine.DecideMovements,
				Movements: []engine.Movement{{StepType: "B"}}, ContinueAsNew: true}})
			decided <- err
		}()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()

		// The SDK's retry, 200 ms after the first send.
		res, err := h.core.Command(ctx, "f1", engine.ContinueAsNew{FlowID: "f1", RunID: run.RunID, RequestID: "k1"})
		if err := <-first; err != nil {
			t.Fatalf("the first send: %v", err)
		}
		if err := <-decided; err != nil {
			t.Fatalf("the carried attempt's result: %v", err)
		}
		want := run.RunID + ".continued-1"
		if err != nil || res.RunID != want {
			t.Fatalf("the retry of k1 answered %+v, %v; want %s, the run k1 made (it committed)", res, err, want)
		}
	})
}
