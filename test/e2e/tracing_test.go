package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testenv"
	"github.com/dexzd/dexzd/internal/testproc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The traced chain flow: three steps; the first one's attempt 1 waits
// for tracedRelease, so that the server can be killed and restarted under
// it; the second one adds a span of its own from its dex.Context.
type (
	TFirst  struct{ dex.Step[int] }
	TSecond struct{ dex.Step[int] }
	TThird  struct{ dex.Step[int] }
)

var (
	tracedStarted = make(chan int, 8)
	tracedRelease = make(chan struct{})
	tracedTP      *sdktrace.TracerProvider // the test's provider, set before the worker runs
)

func (TFirst) Execute(ctx dex.Context, n int) (dex.Decision, error) {
	tracedStarted <- ctx.Info().Attempt
	if ctx.Info().Attempt == 1 {
		select {
		case <-tracedRelease:
		case <-ctx.Done():
		}
	}
	return dex.Move(dex.To[TSecond](n + 1)), nil
}

func (TSecond) Execute(ctx dex.Context, n int) (dex.Decision, error) {
	_, span := tracedTP.Tracer("e2e").Start(ctx, "handler's own span")
	ctx.Logger().Info("inside the second step")
	span.End()
	return dex.Move(dex.To[TThird](n + 1)), nil
}

func (TThird) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(n + 1), nil
}

var tracedFlow = dex.NewFlow("traced3").Start(TFirst{}).Steps(TSecond{}, TThird{})

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// One trace shows a flow end to end, across processes and a restart: the
// client's StartFlow span, its gRPC attempt, the server's span of the call
// with the log write and apply under it, and every attempt of the three
// steps on the worker under the server's span, the attempt built after
// the server was SIGKILLed and restarted included (the start's trace
// context is durable in the run). The spans arrive at a real OTLP
// receiver (the OpenTelemetry Collector of scripts/testenv.sh); the server
// logs JSON lines, and the handler's log line carries the trace and span
// IDs.
func TestTracing_OneTraceAcrossClientServerWorkerAndARestart(t *testing.T) {
	col := testenv.StartOTelCollector(t)
	// The server's batch span processor exports at once: the spans of the
	// start must be out before the SIGKILL.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dex.yaml")
	cfg := fmt.Sprintf("tracing:\n  endpoint: %s\nlog:\n  format: json\n", col.Endpoint)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", filepath.Join(dir, "data"), "--listen", addr, "--config", cfgPath}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(col.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "dex-e2e"))
	tracedTP = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(50*time.Millisecond)), sdktrace.WithResource(res))
	defer func() { _ = tracedTP.Shutdown(context.Background()) }()

	var workerLog syncBuffer
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: slog.New(slog.NewJSONHandler(&workerLog, nil)),
		ReconnectBackoff: fast, TracerProvider: tracedTP}, tracedFlow)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	defer func() { stopWorker(); <-workerDone }()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger(), RetryBackoff: fast, TracerProvider: tracedTP})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if _, err := c.StartFlow(ctx, tracedFlow, "traced-1", 1); err != nil {
		t.Fatal(err)
	}
	if a := <-tracedStarted; a != 1 {
		t.Fatalf("first attempt is %d", a)
	}
	isServerStart := func(s testenv.Span) bool {
		return s.Service == "dex-server-zd" && s.Name == "dex.FlowService/StartFlow" && s.Kind == "Server"
	}
	col.WaitSpans(t, 30*time.Second, func(ss []testenv.Span) bool {
		for _, s := range ss {
			if isServerStart(s) {
				return true
			}
		}
		return false
	})
	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)
	close(tracedRelease)

	r, err := c.WaitForFlow(ctx, "traced-1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dex.Output[int](r); err != nil || out != 4 {
		t.Fatalf("output %d (%v), want 4", out, err)
	}
	if err := tracedTP.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	p2.Signal(t, syscall.SIGTERM) // flushes the server's spans
	if code := p2.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit status %d", code)
	}

	attempt := func(s testenv.Span, step, n string) bool {
		return s.Name == "dex.Execute "+step && s.Attrs["dex.attempt"] == n
	}
	spans := col.WaitSpans(t, 30*time.Second, func(ss []testenv.Span) bool {
		var first2, third bool
		for _, s := range ss {
			first2 = first2 || attempt(s, "TFirst", "2")
			third = third || attempt(s, "TThird", "1")
		}
		return first2 && third
	})

	// The client's call is the root; its trace holds everything.
	var root testenv.Span
	for _, s := range spans {
		if s.Name == "dex.StartFlow" && s.Service == "dex-e2e" {
			root = s
		}
	}
	if root.ID == "" || root.ParentID != "" {
		t.Fatalf("no root dex.StartFlow span of the client:\n%s", testenv.FormatSpans(spans))
	}
	var trace []testenv.Span
	byID := map[string]testenv.Span{}
	for _, s := range spans {
		if s.TraceID == root.TraceID {
			trace = append(trace, s)
			byID[s.ID] = s
		}
	}
	find := func(what string, match func(testenv.Span) bool) testenv.Span {
		t.Helper()
		for _, s := range trace {
			if match(s) {
				return s
			}
		}
		t.Fatalf("the trace has no %s:\n%s", what, testenv.FormatSpans(trace))
		return testenv.Span{}
	}
	childOf := func(s, parent testenv.Span) {
		t.Helper()
		if s.ParentID != parent.ID {
			t.Errorf("%s %q: parent %s (%q), want %q %s", s.Service, s.Name, s.ParentID, byID[s.ParentID].Name, parent.Name, parent.ID)
		}
	}
	server := find("server StartFlow span", isServerStart)
	grpcClient := byID[server.ParentID]
	if grpcClient.Name != "dex.FlowService/StartFlow" || grpcClient.Kind != "Client" {
		t.Errorf("the server span's parent is %+v, want the client's gRPC span", grpcClient)
	}
	childOf(grpcClient, root)
	for _, name := range []string{"dex.log.append", "dex.log.apply"} {
		s := find(name+" of the start", func(s testenv.Span) bool { return s.Name == name && s.ParentID == server.ID })
		if name == "dex.log.append" && (s.Attrs["dex.log.store"] != "fs" || s.Attrs["dex.log.records"] == "" || s.Attrs["dex.log.bytes"] == "") {
			t.Errorf("dex.log.append attributes = %v, want store fs, records and bytes", s.Attrs)
		}
	}
	for _, a := range []struct{ step, n string }{{"TFirst", "1"}, {"TFirst", "2"}, {"TSecond", "1"}, {"TThird", "1"}} {
		s := find(fmt.Sprintf("attempt %s of %s", a.n, a.step), func(s testenv.Span) bool { return attempt(s, a.step, a.n) })
		childOf(s, server)
		if s.Service != "dex-e2e" || s.Kind != "Consumer" || s.Attrs["dex.flow.id"] != "traced-1" ||
			!strings.HasPrefix(s.Attrs["dex.step.execution_id"], a.step+"-") || s.Attrs["dex.outcome"] != "completed" {
			t.Errorf("attempt span %+v lacks the flow ID, step execution or outcome", s)
		}
	}
	second := find("attempt of TSecond", func(s testenv.Span) bool { return attempt(s, "TSecond", "1") })
	childOf(find("handler's own span", func(s testenv.Span) bool { return s.Name == "handler's own span" }), second)
	// The worker's results are written under the run's trace too, by the
	// restarted server.
	n := 0
	for _, s := range trace {
		if s.Name == "dex.log.append" && s.ParentID == server.ID {
			n++
		}
	}
	if n < 3 {
		t.Errorf("%d dex.log.append spans under the start, want the start's and the results' (at least 3)", n)
	}

	// The handler's log line carries the trace and its attempt's span.
	var logged bool
	for line := range strings.SplitSeq(workerLog.String(), "\n") {
		if strings.Contains(line, "inside the second step") {
			logged = strings.Contains(line, `"trace_id":"`+root.TraceID+`"`) && strings.Contains(line, `"span_id":"`+second.ID+`"`)
		}
	}
	if !logged {
		t.Errorf("the handler's log line lacks trace_id %s and span_id %s:\n%s", root.TraceID, second.ID, workerLog.String())
	}
	// log.format: json: every line the server wrote is a JSON object.
	for line := range strings.SplitSeq(strings.TrimSpace(p2.Log()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("server log line is not JSON: %q", line)
		}
	}
}
