package node_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
)

// InvokeRPC calls that wait for a slow worker do not hold admission slots
// (limits.maxPendingRequests) while they wait: before, two of them made the
// server refuse every StartFlow of every flow type as "overloaded" while
// the sequencer and the log were idle (found in review). Its regression
// test: it failed with "2 requests are in progress".
//
// Covers: E22
func TestAdmission_WaitingRPCsDoNotStarveNewWork(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *config.Config) { c.Limits.MaxPendingRequests = 2 })
	ctx := ctxT(t)
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "o-1",
		StartStep: &dexpb.Movement{StepType: "Start", Input: jsonValue(1)}}); err != nil {
		t.Fatal(err)
	}
	w := connectWorker(t, n.conn, orderHello("w1", 8))
	defer w.close()
	expectTask(t, w.next(), dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1") // never answered
	for range 2 {
		go func() {
			_, _ = n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "o-1", RpcName: "bump",
				Timeout: durationpb.New(20 * time.Second)})
		}()
	}
	for range 2 {
		if task := w.next(); task.GetKind() != dexpb.TaskKind_TASK_KIND_RPC {
			t.Fatalf("task = %v, want the RPC", task)
		}
	}
	// Both RPCs are handed to the worker, which is slow; nothing else waits.
	_, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "other", FlowId: "x-1",
		StartStep: &dexpb.Movement{StepType: "A", Input: jsonValue(1)}})
	if err != nil {
		t.Fatalf("StartFlow of another type while 2 RPCs wait for a worker: %v", err)
	}
}
