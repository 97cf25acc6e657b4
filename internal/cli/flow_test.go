package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Covers: E2, E3
func TestFlowStart_SendsJSONInputAndOptions(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	r := runCLI(t, "flow", "start", "order", "order-42", "--server", addr,
		"--step", "Reserve", "--input", `{ "id": "42", "cents": 1200 }`,
		"--attr", `status="new"`, "--attr", "priority=3",
		"--timeout-after", "1h", "--timeout-policy", "cancel",
		"--id-reuse", "terminate-if-running", "--request-id", "req-7")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "run-1", "req-7")
	calls := f.callsTo("StartFlow")
	if len(calls) != 1 {
		t.Fatalf("StartFlow sent %d times", len(calls))
	}
	want := &dexpb.StartFlowRequest{
		FlowType: "order", FlowId: "order-42",
		StartStep: &dexpb.Movement{StepType: "Reserve", Input: &dexpb.EncodedValue{Encoding: "json", Data: []byte(`{"id":"42","cents":1200}`)}},
		InitialAttributes: []*dexpb.Attribute{
			{Name: "status", Value: &dexpb.EncodedValue{Encoding: "json", Data: []byte(`"new"`)}},
			{Name: "priority", Value: &dexpb.EncodedValue{Encoding: "json", Data: []byte(`3`)}},
		},
		FlowTimeout:       durationpb.New(time.Hour),
		FlowTimeoutPolicy: dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_CANCEL,
		IdReusePolicy:     dexpb.IdReusePolicy_ID_REUSE_POLICY_TERMINATE_IF_RUNNING,
		RequestId:         "req-7",
	}
	if !proto.Equal(calls[0].req, want) {
		t.Errorf("StartFlow got\n%v\nwant\n%v", calls[0].req, want)
	}
}

// Covers: E2
func TestFlowStart_InputFileAndNoStartStep(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	file := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(file, []byte("[1, 2]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "--server", addr, "flow", "start", "order", "o1", "--step", "S", "--input-file", file).wantCode(t, exitOK)
	runCLI(t, "--server", addr, "flow", "start", "order", "o2").wantCode(t, exitOK)
	// Without --step the input goes to the declared start step: a
	// movement without a step type.
	runCLI(t, "--server", addr, "flow", "start", "order", "o3", "--input", "7").wantCode(t, exitOK)
	calls := f.callsTo("StartFlow")
	if got := string(calls[0].req.(*dexpb.StartFlowRequest).GetStartStep().GetInput().GetData()); got != "[1,2]" {
		t.Errorf("input %q, want [1,2]", got)
	}
	if s := calls[1].req.(*dexpb.StartFlowRequest).GetStartStep(); s != nil {
		t.Errorf("start step %v, want none", s)
	}
	if s := calls[2].req.(*dexpb.StartFlowRequest).GetStartStep(); s.GetStepType() != "" || string(s.GetInput().GetData()) != "7" {
		t.Errorf("start step %v, want no step type and the input 7", s)
	}
}

// Covers: E3
func TestFlowStart_RequestIDIsRandomPrintedAndKeptAcrossAddresses(t *testing.T) {
	t.Parallel()
	standby := &fakeServer{startFlow: func(context.Context, *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		return nil, status.Error(codes.Unavailable, "standby")
	}}
	active := &fakeServer{startFlow: func(context.Context, *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		return &dexpb.StartFlowResponse{RunId: "run-1", AlreadyStarted: true}, nil
	}}
	r := runCLI(t, "--server", standby.start(t)+","+active.start(t), "flow", "start", "order", "o1", "-o", "json")
	r.wantCode(t, exitOK)
	m := decodeJSON(t, r.stdout)
	id, _ := m["requestId"].(string)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("requestId %q is not a random ID", id)
	}
	if m["alreadyStarted"] != true || m["runId"] != "run-1" {
		t.Errorf("output %v", m)
	}
	a, b := standby.callsTo("StartFlow"), active.callsTo("StartFlow")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("StartFlow calls %d and %d, want 1 and 1", len(a), len(b))
	}
	for _, c := range append(a, b...) {
		if got := c.req.(*dexpb.StartFlowRequest).GetRequestId(); got != id {
			t.Errorf("request ID sent %q, printed %q", got, id)
		}
	}
}

func TestFlowStart_UsageErrorsSendNothing(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	for _, args := range [][]string{
		{"--step", "S", "--input", `{"a":`},
		{"--step", "S", "--input", "hello"},
		{"--step", "S", "--input", "1", "--input-file", "x.json"},
		{"--step", "S", "--input-file", filepath.Join(t.TempDir(), "missing.json")},
		{"--attr", "noequals"},
		{"--attr", "x=not json"},
		{"--timeout-policy", "cancel"},
		{"--timeout-after", "1h", "--timeout-policy", "explode"},
		{"--id-reuse", "sometimes"},
	} {
		r := runCLI(t, append([]string{"--server", addr, "flow", "start", "order", "o1"}, args...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, "usage: dexcli flow start FLOW_TYPE FLOW_ID [flags]")
	}
	if n := len(f.callsTo("StartFlow")); n != 0 {
		t.Errorf("StartFlow sent %d times", n)
	}
}

// Covers: E25
func TestFlowWait_PollsAgainOnDeadlineExceeded(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	var polls atomic.Int32
	f.waitForFlow = func(context.Context, *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		if polls.Add(1) <= 2 {
			return nil, status.Error(codes.DeadlineExceeded, "long poll expired")
		}
		return &dexpb.WaitForFlowResponse{Result: fixtureResult()}, nil
	}
	addr := f.start(t)
	r := runCLI(t, "--server", addr, "flow", "wait", "order-42", "-o", "json")
	r.wantCode(t, exitOK)
	checkGolden(t, "flow_wait", "json", r.stdout, addr)
	calls := f.callsTo("WaitForFlow")
	if len(calls) != 3 {
		t.Fatalf("WaitForFlow sent %d times, want 3", len(calls))
	}
	for _, c := range calls {
		req := c.req.(*dexpb.WaitForFlowRequest)
		// The run is pinned: the run that was latest when the wait began.
		if req.GetRunId() != "run-1" || req.GetTimeout().AsDuration() != waitPoll {
			t.Errorf("WaitForFlow got %v", req)
		}
	}
	if r.stderr != "" {
		t.Errorf("progress printed to a stderr that is not a terminal: %q", r.stderr)
	}
}

// Covers: E25
func TestFlowWait_TimeoutEndsTheWait(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	f.waitForFlow = func(ctx context.Context, r *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		select {
		case <-ctx.Done():
		case <-time.After(r.GetTimeout().AsDuration()):
		}
		return nil, status.Error(codes.DeadlineExceeded, "long poll expired")
	}
	addr := f.start(t)
	r := runCLI(t, "--server", addr, "flow", "wait", "order-42", "--timeout", "300ms")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "DEADLINE_EXCEEDED", `flow "order-42" (run run-1) did not close within 300ms`, "dexcli flow state order-42")
	for _, c := range f.callsTo("WaitForFlow") {
		if d := c.req.(*dexpb.WaitForFlowRequest).GetTimeout().AsDuration(); d > 300*time.Millisecond {
			t.Errorf("poll timeout %s beyond --timeout", d)
		}
	}
}

// Covers: E25
func TestFlowWait_FailedFlowIsAResult(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	f.waitForFlow = func(context.Context, *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		sum := fixtureSummary()
		return &dexpb.WaitForFlowResponse{Result: &dexpb.FlowResult{
			FlowType: "order", FlowId: "order-42", RunId: "run-1", Status: sum.GetStatus(), Error: sum.GetError(), CloseTime: sum.GetCloseTime(),
		}}, nil
	}
	addr := f.start(t)
	r := runCLI(t, "--server", addr, "flow", "wait", "order-42")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "FAILED", "WORKER_API_FAIL: card declined", "charge.go:12")
}

// Covers: E26, E27
func TestFlowReads_Paging(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	f.getHistory = func(_ context.Context, r *dexpb.GetHistoryEventsRequest) (*dexpb.GetHistoryEventsResponse, error) {
		events := fixtureHistory()
		if r.GetPageToken() == "" {
			return &dexpb.GetHistoryEventsResponse{RunId: "run-1", Events: events[:4], NextPageToken: "p2"}, nil
		}
		return &dexpb.GetHistoryEventsResponse{RunId: "run-1", Events: events[4:]}, nil
	}
	f.listFlows = func(_ context.Context, r *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error) {
		page := []*dexpb.FlowSummary{{FlowId: "a"}, {FlowId: "b"}}
		if r.GetPageToken() == "" {
			return &dexpb.ListFlowsResponse{Flows: page, NextPageToken: "next"}, nil
		}
		return &dexpb.ListFlowsResponse{Flows: page[:1]}, nil
	}
	addr := f.start(t)

	r := runCLI(t, "--server", addr, "flow", "history", "order-42", "--page-size", "4")
	r.wantCode(t, exitOK)
	r.wantStderr(t, "--page-token p2")
	if m := decodeJSON(t, runCLI(t, "--server", addr, "flow", "history", "order-42", "--all", "-o", "json").stdout); len(m["events"].([]any)) != len(fixtureHistory()) {
		t.Errorf("history --all returned %d events, want %d", len(m["events"].([]any)), len(fixtureHistory()))
	}
	h := f.callsTo("GetHistoryEvents")
	if last := h[len(h)-1].req.(*dexpb.GetHistoryEventsRequest); last.GetRunId() != "run-1" || last.GetPageToken() != "p2" {
		t.Errorf("second page request %v, want run-1 and token p2", last)
	}

	r = runCLI(t, "--server", addr, "flow", "list", "--limit", "3", "--type", "order", "--status", "failed,Cancelled",
		"--from", "2025-01-01", "--to", "2025-01-02T00:00:00Z", "-o", "json")
	r.wantCode(t, exitOK)
	m := decodeJSON(t, r.stdout)
	if len(m["flows"].([]any)) != 3 || m["hasMore"] != false {
		t.Errorf("list output %v, want 3 flows and no more", m)
	}
	l := f.callsTo("ListFlows")
	first := l[0].req.(*dexpb.ListFlowsRequest)
	if first.GetPageSize() != 3 || first.GetFlowType() != "order" || len(first.GetStatuses()) != 2 ||
		first.GetStatuses()[1] != dexpb.FlowStatus_FLOW_STATUS_CANCELED ||
		!first.GetStartTimeFrom().AsTime().Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("first list request %v", first)
	}
	if second := l[1].req.(*dexpb.ListFlowsRequest); second.GetPageSize() != 1 || second.GetPageToken() != "next" {
		t.Errorf("second list request %v, want page size 1 with the token", second)
	}

	r = runCLI(t, "--server", addr, "flow", "list", "--limit", "1")
	r.wantCode(t, exitOK)
	r.wantStderr(t, "raise --limit")
	runCLI(t, "--server", addr, "flow", "list", "--status", "sleeping").wantCode(t, exitUsage)
	runCLI(t, "--server", addr, "flow", "list", "--since", "1h", "--from", "2025-01-01").wantCode(t, exitUsage)
}

// Covers: E22
func TestFlowRPC_WorkerErrorAndNoRetryAfterReachingAServer(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	f.invokeRPC = func(context.Context, *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
		st, err := status.New(codes.FailedPrecondition, "rpc handler failed").WithDetails(&dexpb.WorkerError{
			ErrorType: "*orders.NotReady", Message: "order not reserved", Stack: "orders.status\n\trpc.go:9",
		})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	f.getSummary = func(context.Context, *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
		return &dexpb.GetFlowSummaryResponse{Summary: fixtureState().GetSummary()}, nil // running
	}
	addr := f.start(t)
	r := runCLI(t, "--server", addr, "flow", "rpc", "order-42", "status", `{"verbose":true}`)
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "FAILED_PRECONDITION", "the RPC handler returned an error", "*orders.NotReady: order not reserved")
	// A returned business error prints no goroutine dump; -o json keeps it.
	if strings.Contains(r.stderr, "rpc.go:9") {
		t.Errorf("a returned error's stack in the text output:\n%s", r.stderr)
	}
	r = runCLI(t, "--server", addr, "flow", "rpc", "order-42", "status", "-o", "json")
	r.wantCode(t, exitFailure)
	if !strings.Contains(r.stdout+r.stderr, `"stack": "orders.status\n\trpc.go:9"`) {
		t.Errorf("the JSON error document lacks the worker's stack:\n%s%s", r.stdout, r.stderr)
	}
	if in := f.callsTo("InvokeRPC")[0].req.(*dexpb.InvokeRPCRequest).GetInput(); string(in.GetData()) != `{"verbose":true}` || in.GetEncoding() != "json" {
		t.Errorf("RPC input %v", in)
	}

	unavailable := &fakeServer{invokeRPC: func(context.Context, *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
		return nil, status.Error(codes.Unavailable, "stepped down")
	}}
	other := fixtureServer()
	r = runCLI(t, "--server", unavailable.start(t)+","+other.start(t), "flow", "rpc", "order-42", "status")
	r.wantCode(t, exitFailure)
	if n := len(other.callsTo("InvokeRPC")); n != 0 {
		t.Errorf("InvokeRPC repeated on the next address after UNAVAILABLE from a reachable one")
	}
	// An unreachable address is skipped: the call was never sent there.
	runCLI(t, "--server", closedAddr(t)+","+addr, "flow", "rpc", "order-42", "status").wantCode(t, exitFailure)
	if n := len(f.callsTo("InvokeRPC")); n != 3 {
		t.Errorf("InvokeRPC reached the second address %d times, want 3 in total (two direct calls, one past the unreachable address)", n)
	}
}

// Covers: E23, E16, E19, E21
func TestFlowWrites_Requests(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	run := func(args ...string) { runCLI(t, append([]string{"--server", addr}, args...)...).wantCode(t, exitOK) }
	run("flow", "stop", "order-42", "--fail", "--reason", "customer withdrew", "--run", "run-1")
	run("flow", "publish", "order-42", "items", `{"sku":"a1"}`, "-5", "--request-id", "p1")
	run("flow", "skip-timer", "order-42", "AwaitApproval-1", "--timer-index", "2")
	run("flow", "set-attrs", "order-42", `status="held"`)
	run("flow", "get-attrs", "order-42", "status", "missing")

	checks := []struct {
		method string
		want   proto.Message
	}{
		{"StopFlow", &dexpb.StopFlowRequest{FlowId: "order-42", RunId: "run-1", Type: dexpb.StopType_STOP_TYPE_FAIL, Reason: "customer withdrew"}},
		{"PublishToChannel", &dexpb.PublishToChannelRequest{FlowId: "order-42", RequestId: "p1", Publishes: []*dexpb.ChannelPublish{{
			Channel: "items", Values: []*dexpb.EncodedValue{jsonEncoded([]byte(`{"sku":"a1"}`)), jsonEncoded([]byte("-5"))},
		}}}},
		{"SkipTimer", &dexpb.SkipTimerRequest{FlowId: "order-42", StepExecutionId: "AwaitApproval-1", Timer: &dexpb.SkipTimerRequest_TimerIndex{TimerIndex: 2}}},
		{"SetAttributes", &dexpb.SetAttributesRequest{FlowId: "order-42", Attributes: []*dexpb.Attribute{{Name: "status", Value: jsonEncoded([]byte(`"held"`))}}}},
		{"GetAttributes", &dexpb.GetAttributesRequest{FlowId: "order-42", Names: []string{"status", "missing"}}},
	}
	for _, c := range checks {
		calls := f.callsTo(c.method)
		if len(calls) != 1 || !proto.Equal(calls[0].req, c.want) {
			t.Errorf("%s got %v, want %v", c.method, calls, c.want)
		}
	}

	for _, args := range [][]string{
		{"flow", "stop", "order-42", "--cancel", "--terminate"},
		{"flow", "skip-timer", "order-42", "X-1"},
		{"flow", "skip-timer", "order-42", "X-1", "--timer-id", "a", "--timer-index", "0"},
		{"flow", "skip-timer", "order-42", "X-1", "--timer-index", "-1"},
		{"flow", "publish", "order-42", "items", "{bad"},
		{"flow", "set-attrs", "order-42", "status"},
		{"flow", "rpc", "order-42", "status", "nope"},
	} {
		runCLI(t, append([]string{"--server", addr}, args...)...).wantCode(t, exitUsage)
	}
}

// flow wait keeps waiting while every address answers UNAVAILABLE (a
// restart or failover), says so once on stderr, and prints the result once
// a server answers again.
func TestFlowWait_KeepsWaitingThroughARestart(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	var polls atomic.Int32
	f.waitForFlow = func(context.Context, *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		if polls.Add(1) <= 3 {
			return nil, status.Error(codes.Unavailable, "this process is a standby")
		}
		return &dexpb.WaitForFlowResponse{Result: fixtureResult()}, nil
	}
	r := runCLI(t, "--server", f.start(t), "flow", "wait", "order-42", "--timeout", "20s")
	r.wantCode(t, exitOK)
	r.wantStderr(t, "server restarting or failing over (this process is a standby), still waiting")
	if n := strings.Count(r.stderr, "still waiting"); n != 1 {
		t.Errorf("said %d times that it is still waiting, want once per outage:\n%s", n, r.stderr)
	}
	r.wantStdout(t, "order-42")
}
