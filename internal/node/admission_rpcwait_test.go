package node_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
)

// InvokeRPC calls waiting for a worker hold no slot of the calls in
// progress, so they have a bound of their own (maxPendingRequests): with 2
// and no worker, of 50 paced calls nearly all are refused as overloaded.
// Found in review: before, all 50 were admitted and held.
//
// Covers: E22
func TestAdmission_WaitingRPCsAreBounded(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *config.Config) {
		c.Limits.MaxPendingRequests = 2
		c.Limits.MaxQueuedTasks = 10
	})
	ctx := ctxT(t)
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "o-1",
		StartStep: &dexpb.Movement{StepType: "Start", Input: jsonValue(1)}}); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		time.Sleep(20 * time.Millisecond) // paced, not a burst
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "o-1", RpcName: "bump",
				Input: jsonValue(1), Timeout: durationpb.New(2 * time.Second)})
			if status.Code(err) == codes.ResourceExhausted {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := refused.Load(); n < 40 {
		t.Fatalf("%d of 50 InvokeRPC calls refused while 2 may wait for a worker; want nearly all", n)
	}
}
