package node_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/engine"
)

// rpcEvents returns the flow's RPC_COMPLETED events and its queued
// "approvals" messages.
func rpcEvents(ctx context.Context, t *testing.T, n *testNode, flowID string) ([]*dexpb.RpcCompletedEvent, uint32) {
	t.Helper()
	h, err := n.flows.GetHistoryEvents(ctx, &dexpb.GetHistoryEventsRequest{FlowId: flowID, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []*dexpb.RpcCompletedEvent
	for _, ev := range h.GetEvents() {
		if rc := ev.GetRpcCompleted(); rc != nil {
			out = append(out, rc)
		}
	}
	st, err := n.flows.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: flowID})
	if err != nil {
		t.Fatal(err)
	}
	var queued uint32
	for _, q := range st.GetState().GetChannels() {
		if q.GetChannel() == "approvals" {
			queued = q.GetSize()
		}
	}
	return out, queued
}

// bumpResult is the RPC result the worker returns: an output, an attribute
// write and a publish.
func bumpResult() *dexpb.TaskResult {
	return &dexpb.TaskResult{Result: &dexpb.TaskResult_Rpc{Rpc: &dexpb.RpcResult{Output: jsonValue("bumped")}},
		Writes: &dexpb.StagedWrites{AttributeWrites: []*dexpb.Attribute{{Name: "count", Value: jsonValue(2)}},
			ChannelPublishes: []*dexpb.ChannelPublish{{Channel: "approvals", Values: []*dexpb.EncodedValue{jsonValue("m")}}}}}
}

// sendResult sends a result without waiting for its ack.
func (w *testWorker) sendResult(token []byte, r *dexpb.TaskResult) {
	w.t.Helper()
	r.TaskToken = token
	if err := w.stream.Send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_TaskResult{TaskResult: r}}); err != nil {
		w.t.Fatal(err)
	}
}

// An RPC result commits, the caller gets its answer, the worker's stream
// breaks before the TaskAck arrives, and the worker sends the
// unacknowledged result again on its next stream (same process, same
// epoch): it is acknowledged and commits nothing (one RPC_COMPLETED, one
// queued message). A result whose caller gave up commits once, with the
// call's name; its resend commits nothing. After a restart (a new epoch)
// a resend is refused as stale and the run is unchanged.
//
// Covers: E22, E6, W2
func TestDev_RPCResultSentAgainCommitsOnce(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	ctx := ctxT(t)
	w1 := connectWorker(t, n.conn, orderHello("w1", 4))
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "r-1",
		StartStep: &dexpb.Movement{StepType: "Wait"}}); err != nil {
		t.Fatal(err)
	}
	expectTask(t, w1.next(), dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1") // left running

	answered := make(chan error, 1)
	go func() {
		r, err := n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "r-1", RpcName: "bump", Input: jsonValue(1)})
		if err == nil && string(r.GetOutput().GetData()) != `"bumped"` {
			t.Errorf("InvokeRPC output = %s", r.GetOutput().GetData())
		}
		answered <- err
	}()
	task := w1.next()
	if task.GetKind() != dexpb.TaskKind_TASK_KIND_RPC {
		t.Fatalf("task = %v, want the RPC", task)
	}
	w1.sendResult(task.GetTaskToken(), bumpResult())
	if err := <-answered; err != nil {
		t.Fatalf("InvokeRPC: %v", err)
	}
	w1.close() // the stream breaks; the worker never read the ack

	w2 := connectWorker(t, n.conn, orderHello("w1", 4))
	expectAck(t, w2.result(task, bumpResult()), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	if evs, queued := rpcEvents(ctx, t, n, "r-1"); len(evs) != 1 || queued != 1 {
		t.Fatalf("after the resend: %d RPC_COMPLETED events %v, %d queued messages; want 1 and 1", len(evs), evs, queued)
	}

	// The caller gives up before the result arrives: the late result
	// commits once, with the call's name and input.
	go func() {
		_, err := n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "r-1", RpcName: "bump", Input: jsonValue(2),
			Timeout: durationpb.New(200 * time.Millisecond)})
		answered <- err
	}()
	late := w2.next()
	if err := <-answered; status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("InvokeRPC that gave up = %v, want DEADLINE_EXCEEDED", err)
	}
	expectAck(t, w2.result(late, bumpResult()), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	w2.close()
	w3 := connectWorker(t, n.conn, orderHello("w1", 4))
	expectAck(t, w3.result(late, bumpResult()), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	evs, queued := rpcEvents(ctx, t, n, "r-1")
	if len(evs) != 2 || queued != 2 {
		t.Fatalf("after the late result and its resend: %d RPC_COMPLETED events %v, %d queued; want 2 and 2", len(evs), evs, queued)
	}
	if evs[1].GetRpcName() != "bump" || string(evs[1].GetInput().GetData()) != "2" {
		t.Fatalf("late RPC_COMPLETED = %v, want RPC bump with input 2", evs[1])
	}

	// A restart is a new epoch: the old token is refused, nothing commits.
	w3.close()
	if err := n.stop(t); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, nil)
	w4 := connectWorker(t, n.conn, orderHello("w1", 4))
	expectAck(t, w4.result(task, bumpResult()), dexpb.TaskAckStatus_TASK_ACK_STATUS_STALE_EPOCH)
	if evs, queued := rpcEvents(ctx, t, n, "r-1"); len(evs) != 2 || queued != 2 {
		t.Fatalf("after the restart: %d RPC_COMPLETED events, %d queued; want 2 and 2", len(evs), queued)
	}
}

// A committed RPC's result resent after more than RPCCallIDWindow later
// calls of the same run committed (a worker cut off for a while on a busy
// flow) is refused and commits nothing; before, the engine no longer
// remembered the call and committed it a second time (found in review).
//
// Covers: E22, W2
func TestDev_RPCResultResentPastTheWindowIsRefused(t *testing.T) {
	// A thousand commits: without fsync, and with time for the race
	// detector.
	n := startNode(t, t.TempDir(), func(cfg *config.Config) { cfg.Dev.DurabilityMode = config.DurabilityProcessCrashSafe })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w1 := connectWorker(t, n.conn, orderHello("w1", 4))
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "r-1",
		StartStep: &dexpb.Movement{StepType: "Wait"}}); err != nil {
		t.Fatal(err)
	}
	expectTask(t, w1.next(), dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1") // left running
	invoke := func(w *testWorker) *dexpb.Task {
		answered := make(chan error, 1)
		go func() {
			_, err := n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "r-1", RpcName: "bump", Input: jsonValue(1)})
			answered <- err
		}()
		task := w.next()
		w.sendResult(task.GetTaskToken(), bumpResult()) // its ack is never read
		if err := <-answered; err != nil {
			t.Fatalf("InvokeRPC: %v", err)
		}
		return task
	}
	first := invoke(w1)
	w1.close() // the ack of the first call is lost with the stream
	// RPCCallIDWindow more calls commit, 16 at a time.
	const par = 16
	w2 := connectWorker(t, n.conn, orderHello("w1", par))
	calls := make(chan struct{}, engine.RPCCallIDWindow)
	for range engine.RPCCallIDWindow {
		calls <- struct{}{}
	}
	close(calls)
	errs := make(chan error, par)
	for range par {
		go func() {
			var err error
			for range calls {
				if _, err = n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "r-1", RpcName: "bump", Input: jsonValue(1)}); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for answered := 0; answered < engine.RPCCallIDWindow; {
		task := w2.next()
		if task.GetKind() != dexpb.TaskKind_TASK_KIND_RPC {
			continue // Wait-1 again, once w1's attempt is given up: left running
		}
		expectAck(t, w2.result(task, bumpResult()), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
		answered++
	}
	for range par {
		if err := <-errs; err != nil {
			t.Fatalf("InvokeRPC: %v", err)
		}
	}
	expectAck(t, w2.result(first, bumpResult()), dexpb.TaskAckStatus_TASK_ACK_STATUS_UNKNOWN_TASK)
	// (The history keeps a bounded number of events; the queue counts.)
	if _, queued := rpcEvents(ctx, t, n, "r-1"); int(queued) != engine.RPCCallIDWindow+1 {
		t.Fatalf("after the resend: %d queued messages; want %d", queued, engine.RPCCallIDWindow+1)
	}
}
