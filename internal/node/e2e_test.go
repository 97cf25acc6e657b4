package node_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A flow started before any worker serves its type waits, visible in live
// state; the worker then runs its steps: decisions, a channel wait, an RPC
// with staged writes, completion and WaitForFlow.
//
// Covers: E2, E4, E5, E6, E7, E15, E16, E18, E21, E22, E25, E26, W1, W2, W5, H1, H2, A1
func TestDev_FlowRunsToCompletionWithChannelsAndRPC(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx := ctxT(t)

	hc := grpc_health_v1.NewHealthClient(n.conn)
	for _, name := range []string{"", "dex.FlowService", "dex.WorkerTaskService"} {
		r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: name})
		if err != nil || r.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("health %q = %v, %v; want SERVING", name, r, err)
		}
	}
	d, err := dexpb.NewAdminServiceClient(n.conn).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil || d.GetNodeId() != "node-1" || d.GetNodeEpoch() != 1 || d.GetHolderProcessId() == "" {
		t.Fatalf("Describe = %v, %v", d, err)
	}

	start, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "o-1",
		StartStep:         &dexpb.Movement{StepType: "Start", Input: jsonValue(map[string]int{"qty": 3})},
		InitialAttributes: []*dexpb.Attribute{{Name: "count", Value: jsonValue(1)}}, RequestId: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "o-1",
		StartStep: &dexpb.Movement{StepType: "Start"}, RequestId: "req-1"})
	if err != nil || again.GetRunId() != start.GetRunId() || !again.GetAlreadyStarted() {
		t.Fatalf("idempotent start = %v, %v; want run %s already started", again, err, start.GetRunId())
	}

	// W5: no worker serves "order" yet: the task waits, visible.
	st, err := n.flows.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	if p := st.GetState().GetPendingTasks(); len(p) != 1 || !p[0].GetNoWorker() || p[0].GetStepExecutionId() != "Start-1" {
		t.Fatalf("pending tasks = %v, want Start-1 with no worker", p)
	}

	w := connectWorker(t, n.conn, orderHello("w1", 4))
	if w.welcome.GetNodeEpoch() != 1 || w.welcome.GetNodeId() != "node-1" {
		t.Fatalf("welcome = %v", w.welcome)
	}
	// The run started before the type was registered, so the engine gave
	// Start-1 a WaitFor; the Hello's declaration says it has none, and the
	// server answers "no wait" itself: the worker gets the Execute.
	task := w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")
	if task.GetAttempt() != 1 || string(task.GetInput().GetData()) != `{"qty":3}` || task.GetInput().GetEncoding() != "json" ||
		len(task.GetAttributes()) != 1 || task.GetFirstAttemptTime() == nil || task.GetAttemptTimeout().AsDuration() != 30*time.Second {
		t.Fatalf("task = %v", task)
	}
	expectAck(t, w.result(task, decide(moveTo("Wait", jsonValue("go")), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)

	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1")
	expectAck(t, w.result(task, waitResult(&dexpb.Wait{Kind: &dexpb.Wait_AnyOf{AnyOf: &dexpb.WaitConditions{
		Conditions: []*dexpb.WaitCondition{channelCond("appr", "approvals"), timerCond("late", time.Hour)}}}})),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)

	st, err = n.flows.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	steps := st.GetState().GetStepExecutions()
	if len(steps) != 1 || steps[0].GetPhase() != dexpb.StepPhase_STEP_PHASE_WAITING ||
		steps[0].GetWait().GetTimers()[0].GetStatus() != dexpb.TimerStatus_TIMER_STATUS_PENDING {
		t.Fatalf("state = %v", st.GetState())
	}

	// E22: an RPC runs on the worker; its staged write commits with it.
	rpcDone := make(chan *dexpb.InvokeRPCResponse, 1)
	rpcErr := make(chan error, 1)
	go func() {
		r, err := n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "o-1", RpcName: "bump", Input: jsonValue(1)})
		rpcDone <- r
		rpcErr <- err
	}()
	task = w.next()
	if task.GetKind() != dexpb.TaskKind_TASK_KIND_RPC || task.GetRpcName() != "bump" || len(task.GetAttributes()) != 1 {
		t.Fatalf("RPC task = %v", task)
	}
	expectAck(t, w.result(task, &dexpb.TaskResult{Result: &dexpb.TaskResult_Rpc{Rpc: &dexpb.RpcResult{Output: jsonValue("bumped")}},
		Writes: &dexpb.StagedWrites{AttributeWrites: []*dexpb.Attribute{{Name: "count", Value: jsonValue(2)}}}}),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	if r, err := <-rpcDone, <-rpcErr; err != nil || string(r.GetOutput().GetData()) != `"bumped"` || r.GetRunId() != start.GetRunId() {
		t.Fatalf("InvokeRPC = %v, %v", r, err)
	}
	attrs, err := n.flows.GetAttributes(ctx, &dexpb.GetAttributesRequest{FlowId: "o-1", Names: []string{"count"}})
	if err != nil || len(attrs.GetAttributes()) != 1 || string(attrs.GetAttributes()[0].GetValue().GetData()) != "2" {
		t.Fatalf("GetAttributes = %v, %v", attrs, err)
	}

	// An RPC handler's error goes to the caller; the flow is not affected.
	go func() {
		_, err := n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "o-1", RpcName: "bump"})
		rpcErr <- err
	}()
	task = w.next()
	expectAck(t, w.fail(task, &dexpb.TaskFailure{ErrorType: "BumpError", Message: "no bumping today"}), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	err = <-rpcErr
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("failing RPC = %v, want FAILED_PRECONDITION", err)
	}
	var detail *dexpb.WorkerError
	for _, d := range status.Convert(err).Details() {
		if we, ok := d.(*dexpb.WorkerError); ok {
			detail = we
		}
	}
	if detail.GetErrorType() != "BumpError" || detail.GetMessage() != "no bumping today" {
		t.Fatalf("worker error detail = %v", detail)
	}

	// E16, E18: a published message satisfies the wait.
	if _, err := n.flows.PublishToChannel(ctx, &dexpb.PublishToChannelRequest{FlowId: "o-1", Publishes: []*dexpb.ChannelPublish{
		{Channel: "approvals", Values: []*dexpb.EncodedValue{jsonValue("yes"), jsonValue("extra")}}}}); err != nil {
		t.Fatal(err)
	}
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Wait-1")
	cr := task.GetConditionResults()
	if len(cr.GetChannels()) != 1 || !cr.GetChannels()[0].GetSatisfied() || len(cr.GetChannels()[0].GetMessages()) != 1 ||
		string(cr.GetChannels()[0].GetMessages()[0].GetData()) != `"yes"` || len(cr.GetTimers()) != 1 || cr.GetTimers()[0].GetFired() {
		t.Fatalf("condition results = %v", cr)
	}
	if string(task.GetAttributes()[0].GetValue().GetData()) != "2" {
		t.Fatalf("attributes = %v", task.GetAttributes())
	}

	waited := make(chan *dexpb.WaitForFlowResponse, 1)
	go func() {
		r, err := n.flows.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: "o-1"})
		if err != nil {
			t.Errorf("WaitForFlow: %v", err)
		}
		waited <- r
	}()
	expectAck(t, w.result(task, decide(complete(jsonValue("done")),
		&dexpb.StagedWrites{AttributeWrites: []*dexpb.Attribute{{Name: "note", Value: jsonValue("approved")}}})),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	r := <-waited
	res := r.GetResult()
	if res.GetStatus() != dexpb.FlowStatus_FLOW_STATUS_COMPLETED || len(res.GetOutputs()) != 1 ||
		res.GetOutputs()[0].GetStepExecutionId() != "Wait-1" || string(res.GetOutputs()[0].GetOutput().GetData()) != `"done"` {
		t.Fatalf("result = %v", res)
	}
	// Attributes stay readable after close; the queue keeps the unconsumed message.
	attrs, err = n.flows.GetAttributes(ctx, &dexpb.GetAttributesRequest{FlowId: "o-1"})
	if err != nil || len(attrs.GetAttributes()) != 2 {
		t.Fatalf("attributes after close = %v, %v", attrs, err)
	}
	hist, err := n.flows.GetHistoryEvents(ctx, &dexpb.GetHistoryEventsRequest{FlowId: "o-1", PageSize: 3})
	if err != nil || len(hist.GetEvents()) != 3 || hist.GetEvents()[0].GetFlowStarted() == nil || hist.GetNextPageToken() == "" {
		t.Fatalf("history page 1 = %v, %v", hist, err)
	}
	all := hist.GetEvents()
	for tok := hist.GetNextPageToken(); tok != ""; {
		h, err := n.flows.GetHistoryEvents(ctx, &dexpb.GetHistoryEventsRequest{FlowId: "o-1", PageSize: 3, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, h.GetEvents()...)
		tok = h.GetNextPageToken()
	}
	if last := all[len(all)-1]; last.GetFlowClosed().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_COMPLETED {
		t.Fatalf("last history event = %v", last)
	}
	for i, ev := range all {
		if ev.GetEventId() != uint64(i+1) {
			t.Fatalf("event %d has ID %d", i, ev.GetEventId())
		}
	}
}

// A timer wait fires, a decision fails the flow, a stopped flow refuses a
// late result, a long poll expires, ListFlows pages newest first.
//
// Covers: E5, E8, E15, E23, E25, E27, W2
func TestDev_TimersStopLongPollAndList(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx := ctxT(t)
	w := connectWorker(t, n.conn, orderHello("w1", 4))

	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "t-1",
		StartStep: &dexpb.Movement{StepType: "Wait"}}); err != nil {
		t.Fatal(err)
	}
	task := w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1")
	began := time.Now()
	expectAck(t, w.result(task, waitResult(&dexpb.Wait{Kind: &dexpb.Wait_Until{Until: timerCond("soon", 300*time.Millisecond)}})),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Wait-1")
	if time.Since(began) < 250*time.Millisecond || !task.GetConditionResults().GetTimers()[0].GetFired() {
		t.Fatalf("timer fired after %v: %v", time.Since(began), task.GetConditionResults())
	}
	expectAck(t, w.result(task, decide(&dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceFail{ForceFail: &dexpb.ForceFail{Reason: "nope"}}}, nil)),
		dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	r, err := n.flows.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: "t-1"})
	if err != nil || r.GetResult().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_FAILED ||
		r.GetResult().GetError().GetType() != dexpb.FlowErrorType_FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW ||
		r.GetResult().GetError().GetMessage() != "nope" {
		t.Fatalf("WaitForFlow = %v, %v", r, err)
	}

	// E23, W2: a stopped flow's late result commits nothing.
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "t-2",
		StartStep: &dexpb.Movement{StepType: "Start"}}); err != nil {
		t.Fatal(err)
	}
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")

	// E25: a long poll on a running flow expires with DEADLINE_EXCEEDED.
	_, err = n.flows.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: "t-2", Timeout: durationpb.New(200 * time.Millisecond)})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("expired long poll = %v, want DEADLINE_EXCEEDED", err)
	}
	stop, err := n.flows.StopFlow(ctx, &dexpb.StopFlowRequest{FlowId: "t-2", Reason: "changed my mind"})
	if err != nil || stop.GetStatus() != dexpb.FlowStatus_FLOW_STATUS_CANCELED {
		t.Fatalf("StopFlow = %v, %v", stop, err)
	}
	expectAck(t, w.result(task, decide(moveTo("Wait", nil), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_CANCELED)
	if _, err := n.flows.StopFlow(ctx, &dexpb.StopFlowRequest{FlowId: "t-2"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stopping a closed flow = %v, want FAILED_PRECONDITION", err)
	}

	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "t-3"}); err != nil {
		t.Fatal(err)
	}
	list, err := n.flows.ListFlows(ctx, &dexpb.ListFlowsRequest{PageSize: 2})
	if err != nil || len(list.GetFlows()) != 2 || list.GetFlows()[0].GetFlowId() != "t-3" || list.GetNextPageToken() == "" {
		t.Fatalf("ListFlows page 1 = %v, %v", list, err)
	}
	page2, err := n.flows.ListFlows(ctx, &dexpb.ListFlowsRequest{PageSize: 2, PageToken: list.GetNextPageToken()})
	if err != nil || len(page2.GetFlows()) != 1 || page2.GetFlows()[0].GetFlowId() != "t-1" {
		t.Fatalf("ListFlows page 2 = %v, %v", page2, err)
	}
	_, err = n.flows.ListFlows(ctx, &dexpb.ListFlowsRequest{FlowType: "other", PageToken: list.GetNextPageToken()})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("page token with other filters = %v, want INVALID_ARGUMENT", err)
	}
	failed, err := n.flows.ListFlows(ctx, &dexpb.ListFlowsRequest{Statuses: []dexpb.FlowStatus{dexpb.FlowStatus_FLOW_STATUS_FAILED}})
	if err != nil || len(failed.GetFlows()) != 1 || failed.GetFlows()[0].GetFlowId() != "t-1" {
		t.Fatalf("ListFlows FAILED = %v, %v", failed, err)
	}
}

// Covers: E3, E28
func TestDev_ErrorCodes(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *config.Config) { c.Limits.MaxPayloadBytes = 1024 })
	ctx := ctxT(t)
	check := func(what string, err error, want codes.Code, contains string) {
		t.Helper()
		if status.Code(err) != want || !strings.Contains(status.Convert(err).Message(), contains) {
			t.Errorf("%s = %v, want %s containing %q", what, err, want, contains)
		}
	}
	_, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order"})
	check("start without flow ID", err, codes.InvalidArgument, "flowId")
	_, err = n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "e-1", FlowType: "order",
		StartStep: &dexpb.Movement{StepType: "Start", Input: &dexpb.EncodedValue{Data: make([]byte, 2048)}}})
	check("oversized input", err, codes.ResourceExhausted, "input")
	if _, err = n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "e-1", FlowType: "order"}); err != nil {
		t.Fatal(err)
	}
	_, err = n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "e-1", FlowType: "order"})
	check("second start while running", err, codes.AlreadyExists, "e-1")
	_, err = n.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "missing"})
	check("unknown flow", err, codes.NotFound, "missing")
	_, err = n.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "e-1", RunId: "nope"})
	check("unknown run", err, codes.NotFound, "nope")
	_, err = n.flows.SetAttributes(ctx, &dexpb.SetAttributesRequest{FlowId: "e-1",
		Attributes: []*dexpb.Attribute{{Name: "count", Value: &dexpb.EncodedValue{Data: make([]byte, 4096)}}}})
	check("oversized attribute", err, codes.ResourceExhausted, "attributes[0].value")
	_, err = n.flows.PublishToChannel(ctx, &dexpb.PublishToChannelRequest{FlowId: "e-1"})
	check("publish nothing", err, codes.InvalidArgument, "publishes")
	_, err = n.flows.SkipTimer(ctx, &dexpb.SkipTimerRequest{FlowId: "e-1", StepExecutionId: "Wait-1",
		Timer: &dexpb.SkipTimerRequest_TimerIndex{TimerIndex: 0}})
	check("skip a timer that does not exist", err, codes.NotFound, "Wait-1")
	if _, err := n.flows.StopFlow(ctx, &dexpb.StopFlowRequest{FlowId: "e-1", Type: dexpb.StopType_STOP_TYPE_TERMINATE}); err != nil {
		t.Fatal(err)
	}
	_, err = n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "e-1", FlowType: "order", IdReusePolicy: dexpb.IdReusePolicy_ID_REUSE_POLICY_DISALLOW})
	check("DISALLOW on an existing ID", err, codes.AlreadyExists, "DISALLOW")
	_, err = n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "e-1", RpcName: "bump"})
	check("RPC on a closed flow", err, codes.FailedPrecondition, "not running")
	again, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "e-1", FlowType: "order"})
	if err != nil {
		t.Fatalf("default policy after close: %v", err)
	}
	sum, err := n.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "e-1"})
	if err != nil || sum.GetSummary().GetRunId() != again.GetRunId() {
		t.Fatalf("summary = %v, %v", sum, err)
	}
	_, err = n.flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "e-1", RpcName: "bump", Timeout: durationpb.New(100 * time.Millisecond)})
	check("RPC without a worker", err, codes.DeadlineExceeded, "no result")
	_, err = dexpb.NewAdminServiceClient(n.conn).StepDown(ctx, &dexpb.StepDownRequest{ExpectedNodeId: "node-1", ExpectedNodeEpoch: 7})
	check("step down with a stale epoch", err, codes.FailedPrecondition, "nothing changed")
}

// Many flows at once through one worker with several slots: every start is
// acknowledged, no slot is exceeded, every flow completes.
//
// Covers: W1, W3, G3
func TestDev_ConcurrentFlowsThroughOneWorker(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx := ctxT(t)
	w := connectWorker(t, n.conn, orderHello("w1", 8))
	const flows = 60
	errs := make(chan error, flows)
	for i := range flows {
		go func() {
			_, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "c-" + strconv.Itoa(i),
				StartStep: &dexpb.Movement{StepType: "Start"}})
			errs <- err
		}()
	}
	for range flows {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Answer tasks as they come, several at a time; at most 8 may be
	// outstanding.
	outstanding := 0
	var held []*dexpb.Task
	done := 0
	for done < flows {
		select {
		case task := <-w.tasks:
			outstanding++
			if outstanding > 8 {
				t.Fatalf("%d tasks outstanding on a worker with 8 slots", outstanding)
			}
			held = append(held, task)
		case <-time.After(200 * time.Millisecond):
		}
		if len(held) >= 4 || (len(held) > 0 && len(w.tasks) == 0) {
			for _, task := range held {
				r := &dexpb.TaskResult{TaskToken: task.GetTaskToken(), Result: &dexpb.TaskResult_Execute{Execute: &dexpb.ExecuteResult{Decision: complete(nil)}}}
				if err := w.stream.Send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_TaskResult{TaskResult: r}}); err != nil {
					t.Fatal(err)
				}
			}
			for range held {
				expectAck(t, w.ack(), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
				outstanding--
				done++
			}
			held = nil
		}
	}
	list, err := n.flows.ListFlows(ctx, &dexpb.ListFlowsRequest{Statuses: []dexpb.FlowStatus{dexpb.FlowStatus_FLOW_STATUS_COMPLETED}, PageSize: 1000})
	if err != nil || len(list.GetFlows()) != flows {
		t.Fatalf("completed flows = %d, %v", len(list.GetFlows()), err)
	}
}
