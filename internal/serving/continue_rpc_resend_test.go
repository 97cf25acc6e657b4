package serving

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// Issue 14: an RPC result committed in run r1; a client continues the run
// as new before the worker got its TaskAck, and the worker sends the
// result again (its stream broke) under r1's token, once the node has
// answered the caller and forgotten the call. The resend is acknowledged
// ACCEPTED like any duplicate and applies nothing twice; before the fix it
// was refused (CANCELED: "RPC call ... of run r1 is not current"), the new
// run not knowing the call IDs r1 committed. A result for a call that
// never committed stays refused.
//
// Covers: E37, E22
func TestRPCResult_ResentAfterContinueAsNewIsADuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		ctx := context.Background()
		def := &engine.FlowDefinition{Type: "rpc", Steps: map[string]engine.StepDef{"A": {}}, RPCs: []string{"kick"},
			Attributes: []string{"n"}}
		s, err := h.core.OpenSession(ctx, server.WorkerHello{WorkerID: "w1", MaxConcurrent: 5,
			FlowTypes: []server.FlowTypeDecl{{Definition: def}}})
		if err != nil {
			t.Fatal(err)
		}
		run, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: "f1", FlowType: "rpc"})
		if err != nil {
			t.Fatal(err)
		}
		called := make(chan error, 1)
		go func() {
			_, err := h.core.InvokeRPC(ctx, engine.InvokeRPC{FlowID: "f1", Name: "kick"}, 5*time.Second)
			called <- err
		}()
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 || got[0].Method != engine.MethodRPC {
			t.Fatalf("tasks: %+v, want the RPC's", got)
		}
		tok := got[0].Token
		result := engine.RPCResult{Token: tok, Output: engine.Value{Type: ":", Data: []byte("ok")},
			Staged: engine.Staged{Attributes: []engine.AttributeWrite{{Name: "n", Value: engine.Value{Type: ":", Data: []byte("1")}}}}}
		if a, err := s.Result(ctx, tok, result); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("the result: %+v, %v", a, err)
		}
		if err := <-called; err != nil {
			t.Fatal(err)
		}
		res, err := h.core.Command(ctx, "f1", engine.ContinueAsNew{FlowID: "f1", RunID: run.RunID, RequestID: "k1"})
		if err != nil {
			t.Fatal(err)
		}

		a, err := s.Result(ctx, tok, result)
		if err != nil || a.Status != server.AckAccepted {
			t.Fatalf("the resend after the continue-as-new: %+v, %v; want ACCEPTED (a duplicate)", a, err)
		}
		st, err := h.core.cfg.Store.Flow("f1")
		if err != nil {
			t.Fatal(err)
		}
		if st.RunID != res.RunID || string(st.Attributes["n"].Data) != "1" || len(st.History) != 1 {
			t.Fatalf("run %s n=%s with %d events, want %s n=1 with only its FLOW_STARTED: the resend applied nothing",
				st.RunID, st.Attributes["n"].Data, len(st.History), res.RunID)
		}
		other := tok
		other.CallID = tok.CallID + "-never"
		if a, _ := s.Result(ctx, other, engine.RPCResult{Token: other}); a.Status == server.AckAccepted {
			t.Fatalf("a result for a call that never committed was accepted: %+v", a)
		}
	})
}
