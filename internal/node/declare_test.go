package node_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// lateHello declares flow type "late": Charge (no WaitFor) has two
// attempts at most, 100 ms apart, then moves to the recovery step Refund.
func lateHello(id string) *dexpb.Hello {
	two := uint32(2)
	return &dexpb.Hello{WorkerId: id, MaxConcurrentTasks: 4, SdkVersion: "test/0", FlowTypes: []*dexpb.FlowTypeDeclaration{{
		FlowType: "late",
		Steps: []*dexpb.StepDeclaration{
			{StepType: "Charge", Options: &dexpb.StepOptions{
				Execute: &dexpb.StepMethodOptions{RetryPolicy: &dexpb.RetryPolicy{
					InitialInterval: durationpb.New(100 * time.Millisecond), MaximumAttempts: &two}},
				ExecuteFailurePolicy:    dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP,
				ExecuteRecoveryStepType: "Refund"}},
			{StepType: "Refund"},
		},
	}}}
}

// A flow started while no worker of its type is connected (as after every
// restart) is governed by what a worker declares when it connects: the
// step created before the declaration gets no WaitFor task, takes the
// declared maximum of attempts and moves to the declared recovery step.
// The node crashes between the declaration and the step's last attempt:
// the replayed log keeps the declaration (the attempt it interrupted
// counts, T2, because a step with a recovery step starts SYNC).
//
// Covers: W5, E9, E12, E13, T2
func TestDeclaration_GovernsAFlowStartedBeforeIt(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	ctx := ctxT(t)
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "late", FlowId: "late-1",
		StartStep: &dexpb.Movement{StepType: "Charge", Input: jsonValue("order-7")}}); err != nil {
		t.Fatal(err)
	}
	w := connectWorker(t, n.conn, lateHello("w1"))
	task := w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Charge-1")
	if task.GetAttempt() != 1 {
		t.Fatalf("first task is attempt %d, want 1", task.GetAttempt())
	}
	// The worker holds attempt 1 when the node dies.
	w.close()
	n.crash(t)

	n = startNode(t, dir, nil)
	w = connectWorker(t, n.conn, lateHello("w2"))
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Charge-1")
	if task.GetAttempt() != 2 {
		t.Fatalf("after the restart Charge-1 runs attempt %d, want 2 (attempt 1 failed NOT_COMPLETED)", task.GetAttempt())
	}
	expectAck(t, w.fail(task, &dexpb.TaskFailure{ErrorType: "Declined", Message: "card declined"}),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	if task.GetStepExecutionId() != "Refund-1" {
		t.Fatalf("after 2 failed attempts (the declared maximum) the task is %s %s attempt %d, want the recovery step Refund-1",
			task.GetKind(), task.GetStepExecutionId(), task.GetAttempt())
	}
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Refund-1")
}

// The default step options a worker declares for its flow type become the
// config of a flow started before the declaration, as they would have at
// its start: the declared maximum of two attempts fails the flow.
//
// Covers: W5, E9, E13
func TestDeclaration_DefaultStepOptionsGovernAFlowStartedBeforeThem(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx := ctxT(t)
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "late", FlowId: "late-2",
		StartStep: &dexpb.Movement{StepType: "Refund"}}); err != nil {
		t.Fatal(err)
	}
	hello := lateHello("w1")
	two := uint32(2)
	hello.FlowTypes[0].DefaultStepOptions = &dexpb.StepOptions{Execute: &dexpb.StepMethodOptions{RetryPolicy: &dexpb.RetryPolicy{
		InitialInterval: durationpb.New(100 * time.Millisecond), MaximumAttempts: &two}}}
	w := connectWorker(t, n.conn, hello)
	for attempt := uint32(1); attempt <= 2; attempt++ {
		task := w.next()
		expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Refund-1")
		if task.GetAttempt() != attempt {
			t.Fatalf("Refund-1 runs attempt %d, want %d", task.GetAttempt(), attempt)
		}
		expectAck(t, w.fail(task, &dexpb.TaskFailure{ErrorType: "Down", Message: "bank down"}),
			dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	}
	// The failure that exhausted the policy closed the flow in the batch
	// its ack waited for.
	sum, err := n.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "late-2"})
	if err != nil || sum.GetSummary().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_FAILED {
		t.Fatalf("GetFlowSummary = %v, %v; want FAILED after the 2 declared attempts", sum, err)
	}
}
