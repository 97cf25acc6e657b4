package dex_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func newRecorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// traceServer is a FlowService whose StartFlow records the traceparent it
// got and answers UNAVAILABLE the first `refuse` times.
type traceServer struct {
	fakeFlowServer
	mu      sync.Mutex
	parents []string
	refuse  int
}

func (s *traceServer) StartFlow(ctx context.Context, _ *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parents = append(s.parents, strings.Join(md.Get("traceparent"), ","))
	if len(s.parents) <= s.refuse {
		return nil, status.Error(grpccodes.Unavailable, "not yet")
	}
	return &dexpb.StartFlowResponse{RunId: "r1"}, nil
}

func spansNamed(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A call is one span over its retries; each attempt is a gRPC span under
// it (otelgrpc, default Dialer), and the server gets the attempt's span as
// the W3C traceparent.
func TestClient_TracesACallAcrossItsRetries(t *testing.T) {
	t.Parallel()
	tp, exp := newRecorder(t)
	srv := &traceServer{refuse: 1}
	addr := serve(t, nil, srv)
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger(), TracerProvider: tp,
		RetryBackoff: dex.Backoff{Initial: 1, Max: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.StartFlow(t.Context(), testFlow, "f-1", Order{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	calls := spansNamed(exp, "dex.StartFlow")
	attempts := spansNamed(exp, "dex.FlowService/StartFlow")
	if len(calls) != 1 || len(attempts) != 2 {
		t.Fatalf("spans = %v; want one dex.StartFlow and two attempts", exp.GetSpans())
	}
	call := calls[0]
	if attr(call, "dex.flow.id").AsString() != "f-1" || call.Parent.IsValid() {
		t.Errorf("call span: flow ID %q, parent %v; want f-1 and a root", attr(call, "dex.flow.id").AsString(), call.Parent)
	}
	for i, a := range attempts {
		if a.Parent.SpanID() != call.SpanContext.SpanID() || a.SpanKind != trace.SpanKindClient {
			t.Errorf("attempt %d: parent %v kind %v, want the call's span and client", i, a.Parent.SpanID(), a.SpanKind)
		}
		want := "00-" + call.SpanContext.TraceID().String() + "-" + a.SpanContext.SpanID().String() + "-01"
		found := false
		for _, p := range srv.parents {
			found = found || p == want
		}
		if !found {
			t.Errorf("the server got traceparents %q, none is attempt %d's %q", srv.parents, i, want)
		}
	}
}

// On a Conn of the caller's (no otelgrpc), the call's own span is the
// traceparent; without a TracerProvider nothing is sent.
func TestClient_PropagatesOnACallersConnAndNothingUntraced(t *testing.T) {
	t.Parallel()
	srv := &traceServer{}
	addr := serve(t, nil, srv)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tp, exp := newRecorder(t)
	traced, _ := dex.NewClient(dex.ClientOptions{Conn: conn, Logger: quietLogger(), TracerProvider: tp})
	plain, _ := dex.NewClient(dex.ClientOptions{Conn: conn, Logger: quietLogger()})
	if _, err := traced.StartFlow(t.Context(), testFlow, "f-1", Order{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.StartFlow(t.Context(), testFlow, "f-2", Order{ID: "2"}); err != nil {
		t.Fatal(err)
	}
	call := spansNamed(exp, "dex.StartFlow")
	if len(call) != 1 {
		t.Fatalf("spans = %v", exp.GetSpans())
	}
	want := "00-" + call[0].SpanContext.TraceID().String() + "-" + call[0].SpanContext.SpanID().String() + "-01"
	if len(srv.parents) != 2 || srv.parents[0] != want || srv.parents[1] != "" {
		t.Errorf("traceparents = %q, want %q then none", srv.parents, want)
	}
}

// The traced steps: one completes and logs, one fails.
type (
	TracedOK   struct{ dex.Step[int] }
	TracedFail struct{ dex.Step[int] }
)

// tracedSeen is the span context TracedOK's handler ran in last.
var tracedSeen struct {
	sync.Mutex
	sc trace.SpanContext
}

func (TracedOK) Execute(ctx dex.Context, n int) (dex.Decision, error) {
	tracedSeen.Lock()
	tracedSeen.sc = trace.SpanContextFromContext(ctx)
	tracedSeen.Unlock()
	_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("handler").Start(ctx, "own work")
	span.End()
	ctx.Logger().Info("working")
	return dex.GracefulComplete(n), nil
}

func (TracedFail) Execute(dex.Context, int) (dex.Decision, error) {
	return nil, errors.New("card declined")
}

var tracedFlow = dex.NewFlow("traced").Start(TracedOK{}).Steps(TracedFail{})

// An attempt is a span under the task's trace context, with the flow,
// step execution, attempt and outcome; the handler's Context carries it
// (spans it starts are children) and its logger the trace and span IDs.
// Without a TracerProvider the handler's Context still carries the task's
// trace context.
func TestWorker_TracesAttemptsUnderTheTasksTraceContext(t *testing.T) {
	t.Parallel()
	tp, exp := newRecorder(t)
	var logs bytes.Buffer
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}, TracerProvider: tp,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, tracedFlow)
	if err != nil {
		t.Fatal(err)
	}
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	mk := func(step string) *dexpb.Task {
		return &dexpb.Task{Kind: dexpb.TaskKind(dex.KindExecute), TaskToken: []byte(step), FlowType: "traced", FlowId: "f-7",
			RunId: "r1", StepType: step, StepExecutionId: step + "-1", Attempt: 3, Input: jsonValue(t, 1),
			TraceContext: map[string]string{"traceparent": parent}}
	}
	if res := dexraw.HandleTask(t.Context(), w, mk("TracedOK")); res.GetTaskResult() == nil {
		t.Fatalf("TracedOK: %v", res)
	}
	if res := dexraw.HandleTask(t.Context(), w, mk("TracedFail")); res.GetTaskFailure() == nil {
		t.Fatalf("TracedFail: %v", res)
	}
	ok, fail := spansNamed(exp, "dex.Execute TracedOK"), spansNamed(exp, "dex.Execute TracedFail")
	if len(ok) != 1 || len(fail) != 1 {
		t.Fatalf("spans = %v", exp.GetSpans())
	}
	for _, c := range []struct {
		s       tracetest.SpanStub
		outcome string
		code    codes.Code
	}{{ok[0], "completed", codes.Unset}, {fail[0], "failed", codes.Error}} {
		s := c.s
		if s.Parent.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || s.Parent.SpanID().String() != "b7ad6b7169203331" || !s.Parent.IsRemote() {
			t.Errorf("%s: parent %v, want the task's trace context", s.Name, s.Parent)
		}
		if attr(s, "dex.flow.id").AsString() != "f-7" || attr(s, "dex.step.execution_id").AsString() != strings.TrimPrefix(s.Name, "dex.Execute ")+"-1" ||
			attr(s, "dex.attempt").AsInt64() != 3 || attr(s, "dex.outcome").AsString() != c.outcome || s.Status.Code != c.code {
			t.Errorf("%s: attributes %v, status %v", s.Name, s.Attributes, s.Status)
		}
	}
	own := spansNamed(exp, "own work")
	if len(own) != 1 || own[0].Parent.SpanID() != ok[0].SpanContext.SpanID() {
		t.Errorf("the handler's own span: %v, want a child of the attempt's", own)
	}
	line := ""
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"working"`) {
			line = l
		}
	}
	if !strings.Contains(line, `"trace_id":"0af7651916cd43dd8448eb211c80319c"`) || !strings.Contains(line, `"span_id":"`+ok[0].SpanContext.SpanID().String()+`"`) {
		t.Errorf("handler's log line %q lacks the trace and the attempt's span", line)
	}

	// No TracerProvider: no spans, but the handler is inside the trace.
	plain, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}, Logger: quietLogger()}, tracedFlow)
	if err != nil {
		t.Fatal(err)
	}
	before := len(exp.GetSpans())
	dexraw.HandleTask(t.Context(), plain, mk("TracedOK"))
	if n := len(exp.GetSpans()) - before; n != 0 {
		t.Errorf("an untraced worker recorded %d spans", n)
	}
	tracedSeen.Lock()
	sc := tracedSeen.sc
	tracedSeen.Unlock()
	if sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("an untraced worker's handler runs in %v, want the task's trace context", sc)
	}
}
