package node_test

import (
	"fmt"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
)

// Review (adversarial): limits.maxQueuedTasks counts only the tasks that
// wait for a worker. The entries of stopped runs that still sit in the
// queue behind live ones (not compacted yet) do not count: with 2 of 4
// tasks live a StartFlow is admitted. Failed before f3ba5e3 (queuedOf
// counted the queue's length), passes after.
//
// Covers: E28
func TestReview_QueuedTasksBoundCountsLiveTasksOnly(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *config.Config) { c.Limits.MaxQueuedTasks = 4 })
	ctx := ctxT(t)
	start := func(id string) error {
		_, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: id,
			StartStep: &dexpb.Movement{StepType: "Start", Input: jsonValue(1)}})
		return err
	}
	for i := range 4 {
		if err := start(fmt.Sprintf("o-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := start("o-sanity"); err == nil {
		t.Fatal("sanity: a fifth start was admitted")
	}
	for i := range 2 {
		if _, err := n.flows.StopFlow(ctx, &dexpb.StopFlowRequest{FlowId: fmt.Sprintf("o-%d", i+2),
			Type: dexpb.StopType_STOP_TYPE_TERMINATE}); err != nil {
			t.Fatal(err)
		}
	}
	// o-0 and o-1 wait (the stopped runs' entries sit behind them).
	// 2 tasks wait for a worker, the bound is 4.
	if err := start("o-new"); err != nil {
		t.Fatalf("start with 2 of 4 queued tasks live: %v", err)
	}
}
