package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// fakeBackend serves reads from one state and answers commands with err.
type fakeBackend struct {
	serving atomic.Bool
	st      *engine.FlowState
	err     error
	flowErr error // Flow's answer, when set
}

func (f *fakeBackend) Serving() bool { return f.serving.Load() }
func (f *fakeBackend) Identity() server.Identity {
	return server.Identity{NodeID: "n1", Epoch: 7, ProcessID: "host/1/abc"}
}
func (f *fakeBackend) StartFlow(context.Context, engine.StartFlow) (server.StartResult, error) {
	return server.StartResult{RunID: "r1"}, f.err
}
func (f *fakeBackend) Command(context.Context, string, engine.Command) (server.CommandResult, error) {
	return server.CommandResult{}, f.err
}
func (f *fakeBackend) InvokeRPC(context.Context, engine.InvokeRPC, time.Duration) (server.RPCResult, error) {
	return server.RPCResult{}, f.err
}
func (f *fakeBackend) Flow(context.Context, string, string) (*engine.FlowState, error) {
	if f.flowErr != nil {
		return nil, f.flowErr
	}
	if f.st == nil {
		return nil, &engine.Error{Code: engine.CodeNotFound, Message: "flow \"x\" not found"}
	}
	return f.st, nil
}
func (f *fakeBackend) ListFlows(context.Context, server.ListQuery) ([]engine.Summary, string, error) {
	return nil, "", f.err
}
func (f *fakeBackend) WaitForFlow(ctx context.Context, _, _ string) (*engine.FlowState, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (f *fakeBackend) TaskInfo() server.TaskInfo { return nil }
func (f *fakeBackend) OpenSession(context.Context, server.WorkerHello) (server.Session, error) {
	return nil, server.ErrNotServing
}

func serve(t *testing.T, opts server.Options) (*server.Server, *grpc.ClientConn) {
	t.Helper()
	s, addr := serveOn(t, opts)
	return s, dialPlain(t, addr)
}

// Readiness names follow the serving instance's gate on every call: no
// backend or a backend whose lease is not valid answers NOT_SERVING and
// public calls UNAVAILABLE at once; a Watch stream reports the change.
// dex.HotStandby is NOT_SERVING on the active (the active's side of H3).
//
// Covers: H1, H2, L15, H3
func TestHealth_ReadinessFollowsTheGate(t *testing.T) {
	s, conn := serve(t, server.Options{WatchInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := grpc_health_v1.NewHealthClient(conn)
	flows := dexpb.NewFlowServiceClient(conn)
	check := func(name string, want grpc_health_v1.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: name})
		if err != nil || r.GetStatus() != want {
			t.Fatalf("Check(%q) = %v, %v; want %s", name, r, err, want)
		}
	}
	names := []string{"", "dex.FlowService", "dex.WorkerTaskService"}
	for _, n := range names {
		check(n, grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	}
	if _, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "f", FlowType: "t"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("StartFlow without a backend = %v", err)
	}

	watch, err := hc.Watch(ctx, &grpc_health_v1.HealthCheckRequest{Service: "dex.FlowService"})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want grpc_health_v1.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := watch.Recv()
		if err != nil || r.GetStatus() != want {
			t.Fatalf("Watch = %v, %v; want %s", r, err, want)
		}
	}
	next(grpc_health_v1.HealthCheckResponse_NOT_SERVING)

	b := &fakeBackend{st: &engine.FlowState{FlowID: "f", RunID: "r", FlowType: "t", Status: engine.StatusRunning}}
	b.serving.Store(true)
	s.SetBackend(b)
	for _, n := range names {
		check(n, grpc_health_v1.HealthCheckResponse_SERVING)
	}
	next(grpc_health_v1.HealthCheckResponse_SERVING)
	check("dex.HotStandby", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	if _, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service = %v", err)
	}
	if _, err := flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f"}); err != nil {
		t.Fatal(err)
	}

	// The lease stops being valid: at once, no call is answered.
	b.serving.Store(false)
	for _, n := range names {
		check(n, grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	}
	if _, err := flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("read after the lease = %v, want UNAVAILABLE", err)
	}
	if _, err := dexpb.NewAdminServiceClient(conn).Describe(ctx, &dexpb.DescribeRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Describe after the lease = %v, want UNAVAILABLE", err)
	}
	next(grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	s.Close()
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Watch after Close = %v", err)
	}
}

// dex.HotStandby is SERVING only while the process is a hot standby that
// follows the log (SetHotStandby reports true) and no backend serves;
// NOT_SERVING on a cold standby (no SetHotStandby), while the standby is
// not hot (restarting, behind, failed) and on the active, while the
// readiness names stay NOT_SERVING on the standby.
//
// Covers: H3
func TestHealth_HotStandby(t *testing.T) {
	s, conn := serve(t, server.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := grpc_health_v1.NewHealthClient(conn)
	check := func(name string, want grpc_health_v1.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: name})
		if err != nil || r.GetStatus() != want {
			t.Fatalf("Check(%q) = %v, %v; want %s", name, r, err, want)
		}
	}
	check("dex.HotStandby", grpc_health_v1.HealthCheckResponse_NOT_SERVING) // cold standby
	var hot atomic.Bool
	hot.Store(true)
	s.SetHotStandby(hot.Load)
	check("dex.HotStandby", grpc_health_v1.HealthCheckResponse_SERVING)
	for _, n := range []string{"", "dex.FlowService", "dex.WorkerTaskService"} {
		check(n, grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	}
	hot.Store(false) // restarting, behind or failed
	check("dex.HotStandby", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	hot.Store(true)
	b := &fakeBackend{}
	b.serving.Store(true)
	s.SetBackend(b) // the active
	check("dex.HotStandby", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	s.SetBackend(nil)
	s.SetHotStandby(nil)
	check("dex.HotStandby", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
}

// Covers: A1, A2, A9
func TestAdmin_DescribeStepDownAndCredentials(t *testing.T) {
	s, conn := serve(t, server.Options{AdminCredential: "s3cret"})
	b := &fakeBackend{}
	b.serving.Store(true)
	s.SetBackend(b)
	admin := dexpb.NewAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.Describe(ctx, &dexpb.DescribeRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no credential = %v", err)
	}
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong")
	if _, err := admin.Describe(bad, &dexpb.DescribeRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("wrong credential = %v", err)
	}
	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	d, err := admin.Describe(good, &dexpb.DescribeRequest{})
	if err != nil || d.GetNodeId() != "n1" || d.GetNodeEpoch() != 7 || d.GetHolderProcessId() != "host/1/abc" {
		t.Fatalf("Describe = %v, %v", d, err)
	}
	cases := []struct {
		req  *dexpb.StepDownRequest
		want codes.Code
	}{
		{&dexpb.StepDownRequest{ExpectedNodeEpoch: 7}, codes.InvalidArgument},
		{&dexpb.StepDownRequest{ExpectedNodeId: "n1"}, codes.InvalidArgument},
		{&dexpb.StepDownRequest{ExpectedNodeId: "n2", ExpectedNodeEpoch: 7}, codes.FailedPrecondition},
		{&dexpb.StepDownRequest{ExpectedNodeId: "n1", ExpectedNodeEpoch: 6}, codes.FailedPrecondition},
		{&dexpb.StepDownRequest{ExpectedNodeId: "n1", ExpectedNodeEpoch: 7}, codes.Unimplemented},
	}
	for _, c := range cases {
		if _, err := admin.StepDown(good, c.req); status.Code(err) != c.want {
			t.Errorf("StepDown(%v) = %v, want %s", c.req, err, c.want)
		}
	}
}

// Every error kind maps to its code, in one place.
//
// Covers: E28
func TestErrors_MapToCodes(t *testing.T) {
	cases := []struct {
		err  error
		want codes.Code
	}{
		{&engine.Error{Code: engine.CodeInvalidArgument, Field: "flowId", Message: "must not be empty"}, codes.InvalidArgument},
		{&engine.Error{Code: engine.CodeAlreadyExists}, codes.AlreadyExists},
		{&engine.Error{Code: engine.CodeNotFound}, codes.NotFound},
		{&engine.Error{Code: engine.CodeFailedPrecondition, Reason: engine.ErrFlowClosed}, codes.FailedPrecondition},
		{&engine.Error{Code: engine.CodeResourceExhausted, Field: "input"}, codes.ResourceExhausted},
		{&server.WorkerError{Failure: engine.Failure{Type: "E", Message: "m"}}, codes.FailedPrecondition},
		{server.ErrNotServing, codes.Unavailable},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{errors.New("boom"), codes.Internal},
	}
	s, conn := serve(t, server.Options{})
	flows := dexpb.NewFlowServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range cases {
		b := &fakeBackend{err: c.err}
		b.serving.Store(true)
		s.SetBackend(b)
		_, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "f", FlowType: "t"})
		if status.Code(err) != c.want {
			t.Errorf("%v -> %v, want %s", c.err, err, c.want)
		}
	}
	b := &fakeBackend{err: &engine.Error{Code: engine.CodeInvalidArgument, Field: "flowId", Message: "must not be empty"}}
	b.serving.Store(true)
	s.SetBackend(b)
	_, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "f", FlowType: "t"})
	if status.Convert(err).Message() != "flowId: must not be empty" {
		t.Errorf("INVALID_ARGUMENT message = %q, want the field named first", status.Convert(err).Message())
	}
	b.err = &server.WorkerError{Failure: engine.Failure{Type: "E", Message: "m", Stack: "s"}}
	_, err = flows.InvokeRPC(ctx, &dexpb.InvokeRPCRequest{FlowId: "f", RpcName: "r"})
	details := status.Convert(err).Details()
	if len(details) != 1 {
		t.Fatalf("worker error details = %v", details)
	}
	if we, ok := details[0].(*dexpb.WorkerError); !ok || we.GetErrorType() != "E" || we.GetStack() != "s" {
		t.Fatalf("worker error detail = %v", details[0])
	}
	// A size limit names its key in the message and in an ErrorInfo, and
	// carries no RetryInfo (the SDK retries only with one).
	b.err = &engine.Error{Code: engine.CodeResourceExhausted, Field: "request", Limit: "limits.maxRequestBytes",
		Message: "the request's values total 9 bytes, above limits.maxRequestBytes (8 bytes)"}
	_, err = flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "f", FlowType: "t"})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "limits.maxRequestBytes") || len(st.Details()) != 1 {
		t.Fatalf("limit error = %v, details %v", err, st.Details())
	}
	if ei, ok := st.Details()[0].(*errdetails.ErrorInfo); !ok || ei.GetReason() != server.LimitReason ||
		ei.GetMetadata()["limit"] != "limits.maxRequestBytes" {
		t.Fatalf("limit error detail = %v", st.Details()[0])
	}
}

// A standby sets the reason of its UNAVAILABLE answers: every public call
// and Describe say it is a standby and to retry on the active process;
// readiness stays NOT_SERVING. Once a backend is set the reason is no longer
// used: an instance that stops serving answers with the default message.
//
// Covers: S6, P3, H2
func TestStandby_UnavailableNamesTheStandby(t *testing.T) {
	s, conn := serve(t, server.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const reason = `this process is a cold standby of node "n1"; retry on the active process`
	s.SetNotServingReason(reason)
	flows := dexpb.NewFlowServiceClient(conn)
	_, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "f", FlowType: "t"})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != reason {
		t.Fatalf("StartFlow on a standby = %v, want UNAVAILABLE %q", err, reason)
	}
	_, err = flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f"})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != reason {
		t.Fatalf("GetFlowSummary on a standby = %v, want UNAVAILABLE %q", err, reason)
	}
	_, err = dexpb.NewAdminServiceClient(conn).Describe(ctx, &dexpb.DescribeRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != reason {
		t.Fatalf("Describe on a standby = %v, want UNAVAILABLE %q", err, reason)
	}
	stream, err := dexpb.NewWorkerTaskServiceClient(conn).PollWorkerTask(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("PollWorkerTask on a standby = %v, want UNAVAILABLE", err)
	}
	r, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil || r.GetStatus() != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("readiness on a standby = %v, %v", r, err)
	}

	b := &fakeBackend{}
	s.SetBackend(b) // not serving: the default message
	_, err = flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "f", FlowType: "t"})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != server.ErrNotServing.Error() {
		t.Fatalf("StartFlow on a stopped instance = %v, want UNAVAILABLE %q", err, server.ErrNotServing)
	}
}

// A SkipTimer the engine refuses (FAILED_PRECONDITION) is told apart from
// one naming no timer (NOT_FOUND) on committed state; a read of that state
// that fails (a damaged value object) tells nothing: the refusal stands.
// It answered NOT_FOUND (found in review of value objects).
func TestSkipTimer_AFailedReadDoesNotMakeATimerUnknown(t *testing.T) {
	s, conn := serve(t, server.Options{})
	b := &fakeBackend{err: &engine.Error{Code: engine.CodeFailedPrecondition, Message: "timer is not pending"},
		flowErr: fmt.Errorf("%w: value object damaged", server.ErrDataLoss)}
	b.serving.Store(true)
	s.SetBackend(b)
	flows := dexpb.NewFlowServiceClient(conn)
	_, err := flows.SkipTimer(t.Context(), &dexpb.SkipTimerRequest{FlowId: "f", StepExecutionId: "s",
		Timer: &dexpb.SkipTimerRequest_TimerIndex{TimerIndex: 0}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("SkipTimer = %v, want the engine's FAILED_PRECONDITION", err)
	}
	b.flowErr = nil // the flow does not exist: NOT_FOUND
	_, err = flows.SkipTimer(t.Context(), &dexpb.SkipTimerRequest{FlowId: "f", StepExecutionId: "s",
		Timer: &dexpb.SkipTimerRequest_TimerIndex{TimerIndex: 0}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("SkipTimer on an unknown flow = %v, want NOT_FOUND", err)
	}
}
