package node_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/wal"
)

func otherHello(id string) *dexpb.Hello {
	return &dexpb.Hello{WorkerId: id, MaxConcurrentTasks: 1, FlowTypes: []*dexpb.FlowTypeDeclaration{{
		FlowType: "other", Steps: []*dexpb.StepDeclaration{{StepType: "Only"}}}}}
}

// A crash (nothing drained, flushed or released) and a restart on the same
// directory: the restart does not wait for the 30 s lease, acknowledged
// flows are there, the attempt handed out before the crash fails with
// NOT_COMPLETED and is retried, a timer that came due during the outage
// fires, and a task never handed out is dispatched.
//
// Covers: D3, G2, G3, T1, T2, T4, T5, E20, W2
func TestDev_RestartAfterCrashKeepsAcknowledgedState(t *testing.T) {
	dir := t.TempDir()
	n1 := startNode(t, dir, nil)
	ctx := ctxT(t)
	w1 := connectWorker(t, n1.conn, orderHello("w1", 10))

	start := func(n *testNode, id, typ, step string) {
		t.Helper()
		if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: typ, FlowId: id,
			StartStep: &dexpb.Movement{StepType: step}}); err != nil {
			t.Fatal(err)
		}
	}
	start(n1, "r-1", "order", "Start")
	task := w1.next()
	expectAck(t, w1.result(task, decide(complete(jsonValue(1)), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)

	// r-2's Execute is SYNC: its start is durable before it is handed out,
	// so the crash fails it (T2). (An ASYNC start may not be durable yet;
	// T3, internal/serving/core_test.go.)
	if _, err := n1.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "r-2",
		StartStep: &dexpb.Movement{StepType: "Start", Options: &dexpb.StepOptions{Execute: &dexpb.StepMethodOptions{
			Durability: dexpb.AttemptDurability_ATTEMPT_DURABILITY_SYNC}}}}); err != nil {
		t.Fatal(err)
	}
	running := w1.next() // handed out and never answered
	expectTask(t, running, dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")

	start(n1, "r-3", "order", "Wait")
	task = w1.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1")
	expectAck(t, w1.result(task, waitResult(&dexpb.Wait{Kind: &dexpb.Wait_Until{Until: timerCond("", 500*time.Millisecond)}})),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	due := time.Now().Add(500 * time.Millisecond)

	start(n1, "r-4", "other", "Only") // nobody serves "other"

	n1.crash(t)
	time.Sleep(time.Until(due) + 200*time.Millisecond) // the timer comes due during the outage

	began := time.Now()
	n2 := startNode(t, dir, nil)
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("restart took %v; it must not wait for the 30s lease", took)
	}
	d, err := dexpb.NewAdminServiceClient(n2.conn).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil || d.GetNodeEpoch() != 2 {
		t.Fatalf("Describe after restart = %v, %v; want epoch 2", d, err)
	}
	sum, err := n2.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "r-1"})
	if err != nil || sum.GetSummary().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_COMPLETED {
		t.Fatalf("r-1 after restart = %v, %v", sum, err)
	}
	st, err := n2.flows.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: "r-2"})
	if err != nil {
		t.Fatal(err)
	}
	step := st.GetState().GetStepExecutions()[0]
	if f := step.GetLastFailure(); f.GetKind() != dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_NOT_COMPLETED || f.GetAttempt() != 1 ||
		step.GetAttempt().GetAttempt() != 2 {
		t.Fatalf("r-2 after restart: %v", step)
	}

	// Started before a worker reconnected: the definition comes from the
	// running flows, so Start-1 needs no WaitFor.
	start(n2, "r-5", "order", "Start")

	w2 := connectWorker(t, n2.conn, orderHello("w2", 10))
	// A result of the crashed process's epoch is refused (W2).
	expectAck(t, w2.result(running, decide(complete(nil), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_STALE_EPOCH)
	got := map[string]*dexpb.Task{}
	for range 3 {
		task := w2.next()
		got[task.GetFlowId()] = task
	}
	if task := got["r-2"]; task.GetKind() != dexpb.TaskKind_TASK_KIND_EXECUTE || task.GetAttempt() != 2 {
		t.Fatalf("r-2 retry = %v", task)
	}
	if task := got["r-3"]; task.GetKind() != dexpb.TaskKind_TASK_KIND_EXECUTE || !task.GetConditionResults().GetTimers()[0].GetFired() {
		t.Fatalf("r-3 after the timer = %v", task)
	}
	if task := got["r-5"]; task.GetKind() != dexpb.TaskKind_TASK_KIND_EXECUTE {
		t.Fatalf("r-5, started before the worker reconnected = %v; want EXECUTE (definition kept across the restart)", task)
	}
	w3 := connectWorker(t, n2.conn, otherHello("w3"))
	task = w3.next()
	if task.GetFlowId() != "r-4" || task.GetAttempt() != 1 {
		t.Fatalf("r-4 task = %v; want attempt 1 (never handed out)", task)
	}
	if err := n2.stop(t); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

// A graceful stop tells workers to drain, accepts the result of a running
// attempt while it drains, flushes and releases the lease, so the next
// start acquires at once with the next epoch.
//
// Covers: K2, L12
func TestDev_GracefulStopDrainsAndReleases(t *testing.T) {
	dir := t.TempDir()
	n1 := startNode(t, dir, nil)
	ctx := ctxT(t)
	w := connectWorker(t, n1.conn, orderHello("w1", 1))
	if _, err := n1.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "g-1",
		StartStep: &dexpb.Movement{StepType: "Start"}}); err != nil {
		t.Fatal(err)
	}
	task := w.next()
	stopped := make(chan error, 1)
	go func() { n1.cancel(); stopped <- <-n1.done }()
	select {
	case d := <-w.drains:
		if d.GetReason() != dexpb.DrainReason_DRAIN_REASON_SHUTDOWN || d.GetTimeout().AsDuration() != 2*time.Second {
			t.Fatalf("drain = %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no drain notice")
	}
	// Public calls are refused from now on; the running attempt's result is
	// still accepted.
	if _, err := n1.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "g-1"}); err == nil {
		t.Fatal("a public call during the drain succeeded")
	}
	expectAck(t, w.result(task, decide(complete(jsonValue("drained")), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	if err := <-stopped; err != nil {
		t.Fatalf("graceful stop returned %v", err)
	}
	n1.done <- nil

	blobs, err := fs.Open(filepath.Join(dir, node.LogDir), fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := lease.Read(ctx, blobs, wal.MustLayout("", "node-1").LeaseKey())
	_ = blobs.Close()
	if err != nil || !rec.Released || rec.Epoch != 1 {
		t.Fatalf("lease after a graceful stop = %+v, %v; want released epoch 1", rec, err)
	}

	n2 := startNode(t, dir, nil)
	r, err := n2.flows.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: "g-1"})
	if err != nil || string(r.GetResult().GetOutputs()[0].GetOutput().GetData()) != `"drained"` {
		t.Fatalf("g-1 after restart = %v, %v", r, err)
	}
}
