package node_test

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
)

// A start beyond capacity is refused over gRPC with RESOURCE_EXHAUSTED, a
// RetryInfo hint and the limit's key, and nothing was done: the flow does
// not exist. A worker that takes the queued task makes room again.
//
// Covers: E28, W5
func TestAdmission_RefusalOverGRPC(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *config.Config) { c.Limits.MaxQueuedTasks = 1 })
	ctx := ctxT(t)
	start := func(id string) error {
		_, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: id,
			StartStep: &dexpb.Movement{StepType: "Start", Input: jsonValue(1)}})
		return err
	}
	if err := start("o-1"); err != nil {
		t.Fatal(err)
	}
	err := start("o-2")
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("second start: %v, want RESOURCE_EXHAUSTED", err)
	}
	var hint *errdetails.RetryInfo
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			hint = d
		case *errdetails.ErrorInfo:
			info = d
		}
	}
	if hint == nil || hint.GetRetryDelay().AsDuration() <= 0 {
		t.Fatalf("no positive RetryInfo in %v", st.Details())
	}
	if info == nil || info.GetReason() != "OVERLOADED" || info.GetMetadata()["limit"] != "limits.maxQueuedTasks" {
		t.Fatalf("ErrorInfo %v, want reason OVERLOADED naming limits.maxQueuedTasks", info)
	}
	if _, err := n.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "o-2"}); status.Code(err) != codes.NotFound {
		t.Fatalf("refused o-2: %v, want NOT_FOUND", err)
	}
	// Reads are never refused.
	if _, err := n.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "o-1"}); err != nil {
		t.Fatal(err)
	}
	w := connectWorker(t, n.conn, orderHello("w1", 4))
	defer w.close()
	expectTask(t, w.next(), dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")
	if err := start("o-2"); err != nil {
		t.Fatalf("after the worker took the task: %v", err)
	}
}
