package dex_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func dial(t *testing.T, addrs ...string) *dex.Client {
	t.Helper()
	c, err := dex.NewClient(dex.ClientOptions{
		Addresses:    addrs,
		RetryBackoff: dex.Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond},
		Logger:       quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Covers: E2, E3, P5
func TestClient_StartFlowFailsOverAndReusesRequestID(t *testing.T) {
	t.Parallel()
	standby := &fakeFlowServer{} // every call: UNAVAILABLE
	var mu sync.Mutex
	var reqs []*dexpb.StartFlowRequest
	active := &fakeFlowServer{startFlow: func(r *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		reqs = append(reqs, r)
		if len(reqs) == 1 {
			return nil, status.Error(codes.Unavailable, "lease lost") // maybe applied: the retry must be idempotent
		}
		return &dexpb.StartFlowResponse{RunId: "run-1", AlreadyStarted: true}, nil
	}}
	c := dial(t, serve(t, nil, standby), serve(t, nil, active))

	run, err := c.StartFlow(testCtx(t), testFlow, "order-42", Order{ID: "42", Cents: 1200},
		dex.WithAttributes(Status.Value("new")), dex.WithFlowTimeout(time.Hour, dex.TimeoutCancel))
	if err != nil {
		t.Fatal(err)
	}
	if run.RunID != "run-1" || !run.AlreadyStarted || run.FlowID != "order-42" {
		t.Errorf("run = %+v", run)
	}
	if standby.count("StartFlow") == 0 {
		t.Error("the first address was not tried")
	}
	// The standby saw the same request ID as both calls to the active.
	if len(reqs) != 2 || reqs[0].GetRequestId() == "" || reqs[0].GetRequestId() != reqs[1].GetRequestId() {
		t.Fatalf("request IDs = %v", reqs)
	}
	r := reqs[1]
	if r.GetFlowType() != "order" || r.GetFlowId() != "order-42" || r.GetStartStep().GetStepType() != "Reserve" ||
		decodeJSON[Order](t, r.GetStartStep().GetInput()) != (Order{ID: "42", Cents: 1200}) ||
		r.GetStartStep().GetInput().GetType() != "dex_test.Order" {
		t.Errorf("request = %v", r)
	}
	if a := r.GetInitialAttributes(); len(a) != 1 || decodeJSON[string](t, a[0].GetValue()) != "new" {
		t.Errorf("initial attributes = %v", a)
	}
	if r.GetFlowTimeoutPolicy() != dexpb.FlowTimeoutPolicy(dex.TimeoutCancel) || r.GetFlowTimeout().AsDuration() != time.Hour {
		t.Errorf("timeout = %v %v", r.GetFlowTimeout(), r.GetFlowTimeoutPolicy())
	}

	// A second call has a new request ID.
	if _, err := c.StartFlow(testCtx(t), testFlow, "order-43", Order{ID: "43"}); err != nil {
		t.Fatal(err)
	}
	if reqs[2].GetRequestId() == reqs[1].GetRequestId() {
		t.Error("two StartFlow calls share a request ID")
	}
}

// Covers: E2
func TestClient_StartFlowChecksTheInputType(t *testing.T) {
	t.Parallel()
	c := dial(t, "127.0.0.1:1")
	_, err := c.StartFlow(testCtx(t), testFlow, "x", &Order{})
	if err == nil || !strings.Contains(err.Error(), `start step "Reserve" takes dex_test.Order, got *dex_test.Order`) {
		t.Errorf("err = %v", err)
	}
	rpcOnly := dex.NewFlow("counter").RPCs(nilRPC)
	_, err = c.StartFlow(testCtx(t), rpcOnly, "x", 1)
	if err == nil || !strings.Contains(err.Error(), "has no start step") {
		t.Errorf("err = %v", err)
	}
}

// Covers: E7, E25
func TestClient_WaitForFlowPollsAgainAfterDeadlineExceeded(t *testing.T) {
	t.Parallel()
	var polls int
	fs := &fakeFlowServer{waitForFlow: func(r *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		polls++
		if polls < 3 {
			return nil, status.Error(codes.DeadlineExceeded, "long poll expired")
		}
		return &dexpb.WaitForFlowResponse{Result: &dexpb.FlowResult{
			FlowType: "order", FlowId: r.GetFlowId(), RunId: "run-1", Status: dexpb.FlowStatus(dex.StatusCompleted),
			Outputs: []*dexpb.StepOutput{{
				StepType: "Ship", StepExecutionId: "Ship-1", Output: jsonValue(t, Receipt{OrderID: "42", Cents: 1200}),
				Time: timestamppb.Now(),
			}},
			CloseTime: timestamppb.Now(),
		}}, nil
	}}
	c := dial(t, serve(t, nil, fs))
	res, err := c.WaitForFlow(testCtx(t), "order-42")
	if err != nil {
		t.Fatal(err)
	}
	if polls != 3 || res.Status != dex.StatusCompleted || res.Err() != nil || res.Outputs[0].StepExecutionID != "Ship-1" {
		t.Errorf("polls = %d, result = %+v", polls, res)
	}
	rec, err := dex.Output[Receipt](res)
	if err != nil || rec != (Receipt{OrderID: "42", Cents: 1200}) {
		t.Errorf("output = %+v, %v", rec, err)
	}

	// A context that ends stops the polling.
	fs2 := &fakeFlowServer{waitForFlow: func(*dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		return nil, status.Error(codes.DeadlineExceeded, "long poll expired")
	}}
	c2 := dial(t, serve(t, nil, fs2))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c2.WaitForFlow(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
}

// Covers: E7, E8
func TestClient_WaitForFlowReturnsFailedFlowAsResult(t *testing.T) {
	t.Parallel()
	fs := &fakeFlowServer{waitForFlow: func(*dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		return &dexpb.WaitForFlowResponse{Result: &dexpb.FlowResult{Status: dexpb.FlowStatus(dex.StatusFailed), Error: &dexpb.FlowError{
			Type: dexpb.FlowErrorType_FLOW_ERROR_TYPE_WORKER_API_FAIL, Message: "card declined", StepExecutionId: "Charge-1",
			LastAttemptFailure: &dexpb.AttemptFailure{Attempt: 3, ErrorType: "*payments.Declined"},
		}}}, nil
	}}
	c := dial(t, serve(t, nil, fs))
	res, err := c.WaitForFlow(testCtx(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	var fe *dex.FlowError
	if res.Status != dex.StatusFailed || !errors.As(res.Err(), &fe) || fe.LastAttempt.Attempt != 3 || fe.LastAttempt.Type != "*payments.Declined" {
		t.Errorf("result = %+v", res)
	}
	if _, err := dex.Output[Receipt](res); !errors.Is(err, dex.ErrNoValue) {
		t.Errorf("output err = %v", err)
	}
}

// Covers: E22, P5, E28
func TestClient_InvokeRPCIsNeverRetried(t *testing.T) {
	t.Parallel()
	fs := &fakeFlowServer{} // answers UNAVAILABLE, as if it lost its lease mid-call
	c := dial(t, serve(t, nil, fs), serve(t, nil, &fakeFlowServer{}))
	_, err := dex.InvokeRPC(testCtx(t), c, "counter-1", Add, 5)
	if !errors.Is(err, dex.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := fs.count("InvokeRPC"); n != 1 {
		t.Errorf("InvokeRPC sent %d times, want 1", n)
	}
}

// Covers: E22, E28
func TestClient_InvokeRPCTyped(t *testing.T) {
	t.Parallel()
	var got *dexpb.InvokeRPCRequest
	fs := &fakeFlowServer{invokeRPC: func(r *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
		got = r
		if r.GetRpcName() == "status" {
			st, _ := status.New(codes.FailedPrecondition, "the RPC handler failed").WithDetails(
				&dexpb.WorkerError{ErrorType: "*errors.errorString", Message: "no status", Stack: "goroutine 1"})
			return nil, st.Err()
		}
		return &dexpb.InvokeRPCResponse{RunId: "run-1", Output: jsonValue(t, 12)}, nil
	}}
	c := dial(t, serve(t, nil, fs))
	ctx := testCtx(t)
	out, err := dex.InvokeRPC(ctx, c, "counter-1", Add, 5, dex.WithRunID("run-1"))
	if err != nil || out != 12 {
		t.Fatalf("InvokeRPC = %d, %v", out, err)
	}
	if got.GetRpcName() != "add" || got.GetRunId() != "run-1" || decodeJSON[int](t, got.GetInput()) != 5 || got.GetTimeout() == nil {
		t.Errorf("request = %v", got)
	}

	_, err = dex.InvokeRPC(ctx, c, "counter-1", GetStatus, struct{}{})
	var we *dex.WorkerError
	if !errors.Is(err, dex.ErrFailedPrecondition) || !errors.As(err, &we) || we.Message != "no status" || we.Stack == "" {
		t.Errorf("err = %v", err)
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("status.Code = %s", status.Code(err))
	}
}

// Covers: E16, E21
func TestClient_PublishAndAttributes(t *testing.T) {
	t.Parallel()
	var pubs []*dexpb.PublishToChannelRequest
	var sets []*dexpb.SetAttributesRequest
	fs := &fakeFlowServer{
		publishToChannel: func(r *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
			pubs = append(pubs, r)
			if len(pubs) == 1 {
				return nil, status.Error(codes.Unavailable, "retry me")
			}
			return &dexpb.PublishToChannelResponse{RunId: "run-1"}, nil
		},
		setAttributes: func(r *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error) {
			sets = append(sets, r)
			return &dexpb.SetAttributesResponse{}, nil
		},
		getAttributes: func(r *dexpb.GetAttributesRequest) (*dexpb.GetAttributesResponse, error) {
			if len(r.GetNames()) == 1 && r.GetNames()[0] == "counter" {
				return &dexpb.GetAttributesResponse{Attributes: []*dexpb.Attribute{{Name: "counter", Value: jsonValue(t, 7)}}}, nil
			}
			return &dexpb.GetAttributesResponse{}, nil
		},
	}
	c := dial(t, serve(t, nil, fs))
	ctx := testCtx(t)

	if err := c.Publish(ctx, "order-42", []dex.Message{Approve.Message(true), Notes.Message("a"), Notes.Message("b")}); err != nil {
		t.Fatal(err)
	}
	if len(pubs) != 2 || pubs[0].GetRequestId() == "" || pubs[0].GetRequestId() != pubs[1].GetRequestId() {
		t.Fatalf("publishes = %v", pubs)
	}
	p := pubs[1].GetPublishes()
	if len(p) != 2 || p[0].GetChannel() != "approve" || !decodeJSON[bool](t, p[0].GetValues()[0]) ||
		p[1].GetChannel() != "notes" || len(p[1].GetValues()) != 2 || decodeJSON[string](t, p[1].GetValues()[1]) != "b" {
		t.Errorf("publishes = %v", p)
	}

	if err := c.SetAttributes(ctx, "order-42", Status.Value("paused"), Counter.Value(3)); err != nil {
		t.Fatal(err)
	}
	if a := sets[0].GetAttributes(); len(a) != 2 || decodeJSON[string](t, a[0].GetValue()) != "paused" || decodeJSON[int](t, a[1].GetValue()) != 3 {
		t.Errorf("set = %v", a)
	}

	if n, err := dex.GetAttribute(ctx, c, "order-42", Counter); err != nil || n != 7 {
		t.Errorf("counter = %d, %v", n, err)
	}
	if s, err := dex.GetAttribute(ctx, c, "order-42", Status); err != nil || s != "" {
		t.Errorf("status = %q, %v, want the zero value", s, err)
	}
}

// Covers: E19, E23, E27, E28
func TestClient_SkipTimerStopAndList(t *testing.T) {
	t.Parallel()
	var skips []*dexpb.SkipTimerRequest
	fs := &fakeFlowServer{
		skipTimer: func(r *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error) {
			skips = append(skips, r)
			if len(skips) == 2 {
				return nil, status.Error(codes.FailedPrecondition, "timer is not pending")
			}
			return &dexpb.SkipTimerResponse{}, nil
		},
		stopFlow: func(r *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
			if r.GetFlowId() == "missing" {
				return nil, status.Error(codes.NotFound, "flow missing")
			}
			return &dexpb.StopFlowResponse{Status: dexpb.FlowStatus(dex.StatusFailed)}, nil
		},
		listFlows: func(r *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error) {
			return &dexpb.ListFlowsResponse{Flows: []*dexpb.FlowSummary{{FlowId: "a", FlowType: r.GetFlowType(), Status: dexpb.FlowStatus(dex.StatusRunning)}}, NextPageToken: "next"}, nil
		},
	}
	c := dial(t, serve(t, nil, fs))
	ctx := testCtx(t)

	if err := c.SkipTimer(ctx, "order-42", "Await-1", dex.TimerID("deadline")); err != nil {
		t.Fatal(err)
	}
	err := c.SkipTimer(ctx, "order-42", "Await-1", dex.TimerIndex(0))
	if !errors.Is(err, dex.ErrFailedPrecondition) {
		t.Errorf("err = %v", err)
	}
	if skips[0].GetConditionId() != "deadline" || skips[1].GetTimer().(*dexpb.SkipTimerRequest_TimerIndex).TimerIndex != 0 {
		t.Errorf("skips = %v", skips)
	}

	st, err := c.StopFlow(ctx, "order-42", dex.StopFail, "operator")
	if err != nil || st != dex.StatusFailed {
		t.Errorf("StopFlow = %s, %v", st, err)
	}
	if _, err := c.StopFlow(ctx, "missing", dex.StopCancel, ""); !errors.Is(err, dex.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}

	list, err := c.ListFlows(ctx, dex.FlowQuery{FlowType: "order"})
	if err != nil || len(list.Flows) != 1 || list.Flows[0].FlowType != "order" || list.NextPageToken != "next" {
		t.Errorf("list = %+v, %v", list, err)
	}
}

// Covers: P5
func TestClient_GivesUpAfterRetryTimeout(t *testing.T) {
	t.Parallel()
	c, err := dex.NewClient(dex.ClientOptions{
		Addresses:    []string{serve(t, nil, &fakeFlowServer{})},
		RetryBackoff: dex.Backoff{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond},
		RetryTimeout: 100 * time.Millisecond,
		Logger:       quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListFlows(testCtx(t), dex.FlowQuery{}); !errors.Is(err, dex.ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
}

// Covers: P5
func TestClient_OnceCallGoesToTheServingAddress(t *testing.T) {
	t.Parallel()
	standby := &fakeFlowServer{}
	active := &fakeFlowServer{stopFlow: func(*dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
		return &dexpb.StopFlowResponse{Status: dexpb.FlowStatus(dex.StatusCanceled)}, nil
	}}
	c := dial(t, serveWithHealth(t, standby, healthpb.HealthCheckResponse_NOT_SERVING),
		serveWithHealth(t, active, healthpb.HealthCheckResponse_SERVING))
	st, err := c.StopFlow(testCtx(t), "order-42", dex.StopCancel, "")
	if err != nil || st != dex.StatusCanceled {
		t.Fatalf("StopFlow = %s, %v", st, err)
	}
	if standby.count("StopFlow") != 0 || active.count("StopFlow") != 1 {
		t.Errorf("StopFlow sent to standby %d times, to active %d times", standby.count("StopFlow"), active.count("StopFlow"))
	}
}

// serveWithHealth serves fs plus a health service reporting st for
// "dex.FlowService".
func serveWithHealth(t *testing.T, fs dexpb.FlowServiceServer, st healthpb.HealthCheckResponse_ServingStatus) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	dexpb.RegisterFlowServiceServer(srv, fs)
	hs := health.NewServer()
	hs.SetServingStatus("dex.FlowService", st)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
