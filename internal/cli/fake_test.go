package cli

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/clitest"
)

// fakeServer is a test implementation of FlowService and AdminService. It
// records every call it receives (method, request, authorization metadata,
// deadline) and answers with the handler set for the method, or
// UNIMPLEMENTED. Handlers are set before the server starts.
type fakeServer struct {
	dexpb.UnimplementedFlowServiceServer
	dexpb.UnimplementedAdminServiceServer

	mu    sync.Mutex
	calls []fakeCall

	describe    func(context.Context, *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error)
	stepDown    func(context.Context, *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error)
	startFlow   func(context.Context, *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error)
	stopFlow    func(context.Context, *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error)
	publish     func(context.Context, *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error)
	getAttrs    func(context.Context, *dexpb.GetAttributesRequest) (*dexpb.GetAttributesResponse, error)
	setAttrs    func(context.Context, *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error)
	invokeRPC   func(context.Context, *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error)
	skipTimer   func(context.Context, *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error)
	resetFlow   func(context.Context, *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error)
	waitForFlow func(context.Context, *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error)
	getSummary  func(context.Context, *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error)
	getState    func(context.Context, *dexpb.GetFlowStateRequest) (*dexpb.GetFlowStateResponse, error)
	getHistory  func(context.Context, *dexpb.GetHistoryEventsRequest) (*dexpb.GetHistoryEventsResponse, error)
	listFlows   func(context.Context, *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error)
}

// fakeCall is one call the fake received.
type fakeCall struct {
	method string
	req    proto.Message
	auth   []string
	// timeLeft is how long the call had until its deadline when it
	// arrived; 0 without a deadline.
	timeLeft time.Duration
}

func handle[Req proto.Message, Resp any](ctx context.Context, f *fakeServer, method string, req Req,
	h func(context.Context, Req) (Resp, error),
) (Resp, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	c := fakeCall{method: method, req: proto.Clone(req), auth: md.Get("authorization")}
	if dl, ok := ctx.Deadline(); ok {
		c.timeLeft = time.Until(dl)
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if h == nil {
		var zero Resp
		return zero, status.Errorf(codes.Unimplemented, "fake: %s has no handler", method)
	}
	return h(ctx, req)
}

// callsTo returns the calls of one method, in order.
func (f *fakeServer) callsTo(method string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeServer) Describe(ctx context.Context, r *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
	return handle(ctx, f, "Describe", r, f.describe)
}

func (f *fakeServer) StepDown(ctx context.Context, r *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) {
	return handle(ctx, f, "StepDown", r, f.stepDown)
}

func (f *fakeServer) StartFlow(ctx context.Context, r *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
	return handle(ctx, f, "StartFlow", r, f.startFlow)
}

func (f *fakeServer) StopFlow(ctx context.Context, r *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
	return handle(ctx, f, "StopFlow", r, f.stopFlow)
}

func (f *fakeServer) PublishToChannel(ctx context.Context, r *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
	return handle(ctx, f, "PublishToChannel", r, f.publish)
}

func (f *fakeServer) GetAttributes(ctx context.Context, r *dexpb.GetAttributesRequest) (*dexpb.GetAttributesResponse, error) {
	return handle(ctx, f, "GetAttributes", r, f.getAttrs)
}

func (f *fakeServer) SetAttributes(ctx context.Context, r *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error) {
	return handle(ctx, f, "SetAttributes", r, f.setAttrs)
}

func (f *fakeServer) InvokeRPC(ctx context.Context, r *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
	return handle(ctx, f, "InvokeRPC", r, f.invokeRPC)
}

func (f *fakeServer) SkipTimer(ctx context.Context, r *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error) {
	return handle(ctx, f, "SkipTimer", r, f.skipTimer)
}

func (f *fakeServer) ResetFlow(ctx context.Context, r *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error) {
	return handle(ctx, f, "ResetFlow", r, f.resetFlow)
}

func (f *fakeServer) WaitForFlow(ctx context.Context, r *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
	return handle(ctx, f, "WaitForFlow", r, f.waitForFlow)
}

func (f *fakeServer) GetFlowSummary(ctx context.Context, r *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
	return handle(ctx, f, "GetFlowSummary", r, f.getSummary)
}

func (f *fakeServer) GetFlowState(ctx context.Context, r *dexpb.GetFlowStateRequest) (*dexpb.GetFlowStateResponse, error) {
	return handle(ctx, f, "GetFlowState", r, f.getState)
}

func (f *fakeServer) GetHistoryEvents(ctx context.Context, r *dexpb.GetHistoryEventsRequest) (*dexpb.GetHistoryEventsResponse, error) {
	return handle(ctx, f, "GetHistoryEvents", r, f.getHistory)
}

func (f *fakeServer) ListFlows(ctx context.Context, r *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error) {
	return handle(ctx, f, "ListFlows", r, f.listFlows)
}

// start serves f on a loopback port until the test ends and returns its
// address.
func (f *fakeServer) start(t *testing.T) string {
	t.Helper()
	return f.serve(t, false)
}

// startWithHealth is start with a health service that answers SERVING.
func (f *fakeServer) startWithHealth(t *testing.T) string {
	t.Helper()
	return f.serve(t, true)
}

func (f *fakeServer) serve(t *testing.T, withHealth bool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	dexpb.RegisterFlowServiceServer(srv, f)
	dexpb.RegisterAdminServiceServer(srv, f)
	if withHealth {
		grpc_health_v1.RegisterHealthServer(srv, health.NewServer())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// result is what one dexcli run produced.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs dexcli with args and an empty environment, without a
// deadline of its own (the commands' own timeouts are under test).
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLIEnv(t, map[string]string{}, args...)
}

func runCLIEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// wantCode fails the test when r did not exit with code.
func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	r.shared().WantCode(t, code)
}

// wantStderr fails the test when stderr lacks one of subs.
func (r result) wantStderr(t *testing.T, subs ...string) {
	t.Helper()
	r.shared().WantStderr(t, subs...)
}

// wantStdout fails the test when stdout lacks one of subs.
func (r result) wantStdout(t *testing.T, subs ...string) {
	t.Helper()
	r.shared().WantStdout(t, subs...)
}

func (r result) shared() clitest.Result {
	return clitest.Result{Code: r.code, Stdout: r.stdout, Stderr: r.stderr}
}
