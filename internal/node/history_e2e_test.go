package node_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
)

// A publish's request ID makes its retries safe: concurrent retries (as
// after a lost reply) queue the messages once, every other call is
// answered duplicate, and each answer comes only once the publish is
// durable: a committed read right after it sees the publish. A retry after
// the run closed is still a duplicate.
//
// The history then carries the values of what happened: the start step and
// its input, decisions with their movements and the IDs they got, the Wait,
// the RPC's input, output and writes, the publish with its request ID, a
// failed attempt with its retry time, and the outputs.
//
// Covers: E16, E26
func TestDev_PublishRequestIDAndHistoryValues(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx := ctxT(t)
	w := connectWorker(t, n.conn, orderHello("w1", 4))

	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "o-2",
		StartStep: &dexpb.Movement{StepType: "Start", Input: jsonValue(map[string]int{"qty": 1})}}); err != nil {
		t.Fatal(err)
	}
	task := w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")
	expectAck(t, w.result(task, decide(moveTo("Wait", jsonValue("go")), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1")
	expectAck(t, w.result(task, waitResult(&dexpb.Wait{Kind: &dexpb.Wait_Until{Until: channelCond("appr", "approvals")}})),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)

	rpcErr := make(chan error, 1)
	go func() {
		_, err := n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "o-2", RpcName: "bump", Input: jsonValue(5)})
		rpcErr <- err
	}()
	task = w.next()
	if task.GetKind() != dexpb.TaskKind_TASK_KIND_RPC {
		t.Fatalf("task = %v, want the RPC", task)
	}
	expectAck(t, w.result(task, &dexpb.TaskResult{Result: &dexpb.TaskResult_Rpc{Rpc: &dexpb.RpcResult{Output: jsonValue("bumped")}},
		Writes: &dexpb.StagedWrites{AttributeWrites: []*dexpb.Attribute{{Name: "count", Value: jsonValue(2)}}}}),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	if err := <-rpcErr; err != nil {
		t.Fatal(err)
	}

	// E16: six calls with one request ID; one publishes.
	publish := &dexpb.PublishToChannelRequest{FlowId: "o-2", RequestId: "pub-1", Publishes: []*dexpb.ChannelPublish{
		{Channel: "approvals", Values: []*dexpb.EncodedValue{jsonValue("yes"), jsonValue("extra")}}}}
	publishedEvents := func() (int, error) {
		events, err := historyOf(ctx, n, "o-2")
		count := 0
		for _, ev := range events {
			if ev.GetChannelPublished() != nil {
				count++
			}
		}
		return count, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted, duplicates int
	for range 6 {
		wg.Go(func() {
			r, err := n.flows.PublishToChannel(ctx, publish)
			if err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			if got, err := publishedEvents(); err != nil || got != 1 {
				t.Errorf("committed history right after a publish answer (duplicate=%v) has %d publishes (%v), want 1", r.GetDuplicate(), got, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if r.GetDuplicate() {
				duplicates++
			} else {
				accepted++
			}
		})
	}
	wg.Wait()
	if accepted != 1 || duplicates != 5 {
		t.Fatalf("%d publishes accepted, %d duplicates; want 1 and 5", accepted, duplicates)
	}
	st, err := n.flows.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: "o-2"})
	if err != nil {
		t.Fatal(err)
	}
	if q := st.GetState().GetChannels(); len(q) != 1 || q[0].GetSize() != 1 {
		t.Fatalf("queues = %v, want the one unconsumed message", q)
	}

	// The Execute fails once, then completes.
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Wait-1")
	expectAck(t, w.fail(task, &dexpb.TaskFailure{ErrorType: "Busy", Message: "try later"}), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Wait-1")
	expectAck(t, w.result(task, decide(complete(jsonValue("done")), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	if _, err := n.flows.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: "o-2"}); err != nil {
		t.Fatal(err)
	}
	if r, err := n.flows.PublishToChannel(ctx, publish); err != nil || !r.GetDuplicate() {
		t.Fatalf("retry after close = %v, %v; want a duplicate", r, err)
	}

	// E26: the events carry their values.
	events, err := historyOf(ctx, n, "o-2")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range events {
		switch e := ev.GetEvent().(type) {
		case *dexpb.HistoryEvent_FlowStarted:
			kinds = append(kinds, "started")
			fs := e.FlowStarted
			if fs.GetStartStep().GetStepType() != "Start" || string(fs.GetStartStep().GetInput().GetData()) != `{"qty":1}` ||
				fs.GetStartStepExecutionId() != "Start-1" {
				t.Errorf("flow started = %v", fs)
			}
		case *dexpb.HistoryEvent_ExecuteCompleted:
			kinds = append(kinds, "executed "+e.ExecuteCompleted.GetStepExecutionId())
			ec := e.ExecuteCompleted
			switch ec.GetStepExecutionId() {
			case "Start-1":
				ms := ec.GetDecision().GetMovements().GetMovements()
				if len(ms) != 1 || ms[0].GetStepType() != "Wait" || string(ms[0].GetInput().GetData()) != `"go"` ||
					len(ec.GetScheduledStepExecutionIds()) != 1 || ec.GetScheduledStepExecutionIds()[0] != "Wait-1" {
					t.Errorf("Start-1 completed = %v", ec)
				}
			case "Wait-1":
				if ec.GetAttempt() != 2 || string(ec.GetDecision().GetGracefulComplete().GetOutput().GetData()) != `"done"` {
					t.Errorf("Wait-1 completed = %v", ec)
				}
			}
		case *dexpb.HistoryEvent_WaitForCompleted:
			kinds = append(kinds, "waiting")
			if c := e.WaitForCompleted.GetWait().GetUntil(); c.GetId() != "appr" || c.GetChannel().GetChannel() != "approvals" {
				t.Errorf("wait for completed = %v", e.WaitForCompleted)
			}
		case *dexpb.HistoryEvent_RpcCompleted:
			kinds = append(kinds, "rpc")
			rc := e.RpcCompleted
			if rc.GetRpcName() != "bump" || string(rc.GetInput().GetData()) != "5" || string(rc.GetOutput().GetData()) != `"bumped"` ||
				len(rc.GetWrites().GetAttributeWrites()) != 1 || rc.GetWrites().GetAttributeWrites()[0].GetName() != "count" {
				t.Errorf("rpc completed = %v", rc)
			}
		case *dexpb.HistoryEvent_ChannelPublished:
			kinds = append(kinds, "published")
			cp := e.ChannelPublished
			if cp.GetRequestId() != "pub-1" || len(cp.GetPublishes()) != 1 || len(cp.GetPublishes()[0].GetValues()) != 2 ||
				string(cp.GetPublishes()[0].GetValues()[1].GetData()) != `"extra"` {
				t.Errorf("channel published = %v", cp)
			}
		case *dexpb.HistoryEvent_ExecuteFailed:
			kinds = append(kinds, "failed")
			f := e.ExecuteFailed
			// The step's retry policy starts at 100 ms, moved by up to
			// ±20 % (jitter).
			if next := f.GetNextAttemptTime(); next == nil || next.AsTime().Sub(f.GetFailure().GetTime().AsTime()) < 80*time.Millisecond ||
				next.AsTime().Sub(f.GetFailure().GetTime().AsTime()) > 120*time.Millisecond {
				t.Errorf("execute failed = %v; want the next attempt 100ms ± 20 %% after the failure", f)
			}
		case *dexpb.HistoryEvent_FlowClosed:
			kinds = append(kinds, "closed")
			if o := e.FlowClosed.GetOutputs(); len(o) != 1 || string(o[0].GetOutput().GetData()) != `"done"` {
				t.Errorf("flow closed = %v", e.FlowClosed)
			}
		default:
			t.Errorf("unexpected event %v", ev)
		}
	}
	want := []string{"started", "executed Start-1", "waiting", "rpc", "published", "failed", "executed Wait-1", "closed"}
	if len(kinds) != len(want) {
		t.Fatalf("history = %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("history = %v, want %v", kinds, want)
		}
	}
}

// historyOf reads every history event of the flow's latest run.
func historyOf(ctx context.Context, n *testNode, flowID string) ([]*dexpb.HistoryEvent, error) {
	var out []*dexpb.HistoryEvent
	tok := ""
	for {
		h, err := n.flows.GetHistoryEvents(ctx, &dexpb.GetHistoryEventsRequest{FlowId: flowID, PageToken: tok})
		if err != nil {
			return nil, err
		}
		out = append(out, h.GetEvents()...)
		if tok = h.GetNextPageToken(); tok == "" {
			return out, nil
		}
	}
}
