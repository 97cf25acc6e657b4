package node_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// A worker declares its flow type's start step; a StartFlow that names no
// step (dexcli without --step) starts there, with the input it carries. A
// flow type that declares none refuses an input without a step, naming
// the field; a declared start step that is not a step is refused.
//
// Covers: E2
func TestStartFlow_DefaultsToTheDeclaredStartStep(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx := ctxT(t)
	hello := orderHello("w1", 4)
	hello.FlowTypes[0].StartStepType = "Start"
	w := connectWorker(t, n.conn, hello)

	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "d-1"}); err != nil {
		t.Fatal(err)
	}
	expectTask(t, w.next(), dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "d-2",
		StartStep: &dexpb.Movement{Input: jsonValue(42)}}); err != nil {
		t.Fatal(err)
	}
	task := w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")
	if got := string(task.GetInput().GetData()); got != "42" {
		t.Fatalf("start step input %q, want 42", got)
	}

	_, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "other", FlowId: "d-3",
		StartStep: &dexpb.Movement{Input: jsonValue(1)}})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "startStep.stepType") {
		t.Fatalf("input without a step for an undeclared start = %v, want INVALID_ARGUMENT naming startStep.stepType", err)
	}

	bad := orderHello("w2", 1)
	bad.FlowTypes[0].StartStepType = "Nope"
	stream, err := dexpb.NewWorkerTaskServiceClient(n.conn).PollWorkerTask(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_Hello{Hello: bad}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "startStepType") {
		t.Fatalf("Hello with an undeclared start step = %v, want INVALID_ARGUMENT naming startStepType", err)
	}
}
