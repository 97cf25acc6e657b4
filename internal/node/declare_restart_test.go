package node_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// A type whose runs have all closed is still known after a restart, with
// its latest declaration, before any worker of it reconnects: a StartFlow
// without a start step starts at the declared one, and the run follows the
// declared options (no WaitFor task for a step that has none, the declared
// retry policy). Before the store kept its type index, the restarted
// process knew only the types of running flows, so this StartFlow was
// refused.
//
// Covers: W5, E2, E4
func TestDeclaration_SurvivesRestartWithNoRunningFlow(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	hello := func(id string, maxAttempts uint32) *dexpb.Hello {
		return &dexpb.Hello{WorkerId: id, MaxConcurrentTasks: 4, SdkVersion: "test/0", FlowTypes: []*dexpb.FlowTypeDeclaration{{
			FlowType: "invoice", StartStepType: "Issue",
			Steps: []*dexpb.StepDeclaration{{StepType: "Issue", Options: &dexpb.StepOptions{Execute: &dexpb.StepMethodOptions{
				RetryPolicy: &dexpb.RetryPolicy{InitialInterval: durationpb.New(10 * time.Millisecond), MaximumAttempts: &maxAttempts}}}}},
		}}}
	}

	n1 := startNode(t, dir, nil)
	// Two declarations, the later one wins: at most 1 attempt, then 2.
	for i, maxAttempts := range []uint32{1, 2} {
		w := connectWorker(t, n1.conn, hello("w1", maxAttempts))
		id := []string{"i-1", "i-2"}[i]
		if _, err := n1.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "invoice", FlowId: id}); err != nil {
			t.Fatal(err)
		}
		task := w.next()
		expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Issue-1")
		expectAck(t, w.result(task, decide(complete(jsonValue(i)), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
		w.close()
	}
	if err := n1.stop(t); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}

	n2 := startNode(t, dir, nil)
	defer func() { _ = n2.stop(t) }()
	if _, err := n2.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "invoice", FlowId: "i-3"}); err != nil {
		t.Fatalf("StartFlow without a start step after a restart, no worker connected: %v; want the declared start step", err)
	}
	w := connectWorker(t, n2.conn, &dexpb.Hello{WorkerId: "w2", MaxConcurrentTasks: 4, SdkVersion: "test/0",
		FlowTypes: []*dexpb.FlowTypeDeclaration{{FlowType: "unrelated", Steps: []*dexpb.StepDeclaration{{StepType: "X"}}}}})
	w.close() // a worker of another type changes nothing
	w = connectWorker(t, n2.conn, &dexpb.Hello{WorkerId: "w3", MaxConcurrentTasks: 4, SdkVersion: "test/0",
		FlowTypes: []*dexpb.FlowTypeDeclaration{{FlowType: "invoice-v2", Steps: []*dexpb.StepDeclaration{{StepType: "X"}}}}})
	w.close()

	st, err := n2.flows.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: "i-3"})
	if err != nil {
		t.Fatal(err)
	}
	steps := st.GetState().GetStepExecutions()
	if len(steps) != 1 || steps[0].GetStepType() != "Issue" {
		t.Fatalf("i-3 steps = %v; want the declared start step Issue", steps)
	}
	if got := steps[0].GetOptions().GetExecute().GetRetryPolicy().GetMaximumAttempts(); got != 2 {
		t.Fatalf("i-3 Issue max attempts = %d; want 2, the latest declaration's", got)
	}
}
