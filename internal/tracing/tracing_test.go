package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/tracing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestCarrier_SampledSpanOnlyAndBack(t *testing.T) {
	t.Parallel()
	if m := tracing.Carrier(t.Context()); m != nil {
		t.Fatalf("Carrier without a span = %v, want nil", m)
	}
	off := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	ctx, span := off.Tracer("t").Start(t.Context(), "unsampled")
	if m := tracing.Carrier(ctx); m != nil {
		t.Errorf("Carrier of an unsampled span = %v, want nil (an untraced start keeps nothing)", m)
	}
	span.End()

	tp := sdktrace.NewTracerProvider()
	ctx, span = tp.Tracer("t").Start(t.Context(), "sampled")
	defer span.End()
	m := tracing.Carrier(ctx)
	if !strings.HasPrefix(m["traceparent"], "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()) {
		t.Fatalf("Carrier = %v, want the span's traceparent", m)
	}
	sc := tracing.SpanContextOf(m)
	if sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsSampled() || !sc.IsRemote() {
		t.Errorf("SpanContextOf = %+v, want the span's context, sampled and remote", sc)
	}
	if tracing.SpanContextOf(nil).IsValid() || tracing.SpanContextOf(map[string]string{"traceparent": "garbage"}).IsValid() {
		t.Error("SpanContextOf of nothing or garbage is valid")
	}
}

func TestLogHandler_JSONWithTraceAndSpanIDsInsideATracedCall(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(tracing.NewLogHandler(&buf, true)).With("mode", "dev")
	log.Info("outside")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "call")
	log.InfoContext(ctx, "inside", "n", 1)
	span.End()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines = %q", lines)
	}
	var outside, inside map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &outside); err != nil {
		t.Fatalf("line %q is not JSON: %v", lines[0], err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &inside); err != nil {
		t.Fatalf("line %q is not JSON: %v", lines[1], err)
	}
	if _, ok := outside[tracing.LogTraceID]; ok {
		t.Errorf("a line outside a traced call has a trace ID: %v", outside)
	}
	sc := span.SpanContext()
	if inside[tracing.LogTraceID] != sc.TraceID().String() || inside[tracing.LogSpanID] != sc.SpanID().String() ||
		inside["mode"] != "dev" || inside["msg"] != "inside" {
		t.Errorf("line inside the call = %v, want trace_id %s, span_id %s and the logger's attributes", inside, sc.TraceID(), sc.SpanID())
	}

	buf.Reset()
	slog.New(tracing.NewLogHandler(&buf, false)).InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "text")
	if !strings.Contains(buf.String(), "trace_id="+sc.TraceID().String()) || !strings.Contains(buf.String(), "msg=text") {
		t.Errorf("text line = %q", buf.String())
	}
}

func TestEnabled_EndpointOrOTLPEnvironment(t *testing.T) {
	t.Parallel()
	withEndpoint := config.Defaults()
	withEndpoint.Tracing.Endpoint = "http://127.0.0.1:4317"
	none := config.Defaults()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	cases := []struct {
		name string
		cfg  config.Config
		env  func(string) string
		want bool
	}{
		{"off by default", none, env(), false},
		{"tracing.endpoint", withEndpoint, env(), true},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", none, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"), true},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", none, env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4317"), true},
		{"OTEL_SDK_DISABLED wins", withEndpoint, env("OTEL_SDK_DISABLED", "true"), false},
		{"OTEL_SDK_DISABLED=false", withEndpoint, env("OTEL_SDK_DISABLED", "false"), true},
	}
	for _, c := range cases {
		if got := tracing.Enabled(&c.cfg, c.env); got != c.want {
			t.Errorf("%s: Enabled = %v, want %v", c.name, got, c.want)
		}
	}
}

// With tracing off NewProvider builds nothing, and the nil provider's
// methods are safe.
func TestNewProvider_OffIsNil(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	cfg := config.Defaults()
	p, err := tracing.NewProvider(t.Context(), &cfg)
	if err != nil || p != nil {
		t.Fatalf("NewProvider = %v, %v; want nil, nil", p, err)
	}
	if p.TracerProvider() != nil || p.Shutdown() != nil {
		t.Error("nil provider is not inert")
	}
}

// With an endpoint, NewProvider builds a provider without dialling: a
// receiver that is not there does not fail the start.
func TestNewProvider_EndpointNeedsNoReceiverToStart(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("tracing:\n  endpoint: http://127.0.0.1:1\n  sampleRatio: 0.5\n"), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tracing.NewProvider(t.Context(), cfg)
	if err != nil || p == nil {
		t.Fatalf("NewProvider = %v, %v", p, err)
	}
	_, span := p.TracerProvider().Tracer("t").Start(t.Context(), "s")
	span.End()
	// Nobody listens: Shutdown's flush gives up within its bound.
	_ = p.Shutdown()
}
