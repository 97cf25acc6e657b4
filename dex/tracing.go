package dex

import (
	"context"
	"log/slog"
	"strings"

	"github.com/dexzd/dexzd/api/dexpb"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
)

// Tracing (ClientOptions.TracerProvider, WorkerOptions.TracerProvider).
//
// A Client call is one span, "dex.<Call>" (dex.StartFlow, dex.Publish, ...),
// over all its attempts, retries and failovers; its context goes to the
// server in the gRPC metadata as a W3C traceparent. The server keeps the
// trace context of a traced StartFlow with the run, and every task of the
// run carries it (Task.trace_context): a Worker with a TracerProvider
// starts one span per attempt, "dex.<Kind> <step or RPC>", as its child,
// so one trace shows the flow from the client's StartFlow through the
// server's log writes to each worker's attempts, across processes,
// restarts and failovers. The handler's Context carries the attempt's
// span: spans a handler starts from it (with any tracer) are its
// children. Without a TracerProvider the worker still puts the task's
// trace context in the handler's Context, so a handler that traces with
// the global provider joins the flow's trace.

// instrumentationName names the SDK's tracer.
const instrumentationName = "github.com/dexzd/dexzd/dex"

// propagator is the format of trace contexts in gRPC metadata and in
// tasks: W3C Trace Context, which the server reads.
var propagator = propagation.TraceContext{}

// Span attribute keys.
const (
	attrFlowID     = attribute.Key("dex.flow.id")
	attrFlowType   = attribute.Key("dex.flow.type")
	attrRunID      = attribute.Key("dex.run.id")
	attrStepType   = attribute.Key("dex.step.type")
	attrStepExecID = attribute.Key("dex.step.execution_id")
	attrRPC        = attribute.Key("dex.rpc.name")
	attrKind       = attribute.Key("dex.task.kind")
	attrAttempt    = attribute.Key("dex.attempt")
	attrOutcome    = attribute.Key("dex.outcome")
	attrErrorType  = attribute.Key("dex.error.type")
	attrRequestID  = attribute.Key("dex.request_id")
)

// tracer is the SDK's tracing; nil traces nothing.
type tracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

func newTracer(tp trace.TracerProvider) *tracer {
	if tp == nil {
		return nil
	}
	return &tracer{tp: tp, t: tp.Tracer(instrumentationName, trace.WithInstrumentationVersion(Version))}
}

// dialOptions puts the otelgrpc client handler before opts, for the
// default Dialer: each attempt of a FlowService call becomes a gRPC
// client span.
func (t *tracer) dialOptions(opts []grpc.DialOption) []grpc.DialOption {
	if t == nil {
		return opts
	}
	h := otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(t.tp), otelgrpc.WithPropagators(propagator),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
			return strings.HasPrefix(info.FullMethodName, "/dex.FlowService/")
		}))
	return append([]grpc.DialOption{grpc.WithStatsHandler(h)}, opts...)
}

// startCall starts the span of a Client call and puts its context in the
// outgoing metadata (for connections without otelgrpc: a Conn or a
// Dialer of the caller's; otelgrpc replaces it with its attempt span's).
// end records the call's error and ends the span.
func (t *tracer) startCall(ctx context.Context, op, flowID string) (context.Context, func(error)) {
	ctx, span := t.t.Start(ctx, "dex."+op)
	if flowID != "" {
		span.SetAttributes(attrFlowID.String(flowID))
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	propagator.Inject(ctx, mdCarrier(md))
	ctx = metadata.NewOutgoingContext(ctx, md)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// mdCarrier is gRPC metadata as a propagation carrier.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// startAttempt returns the context a task's handler runs in: the task's
// trace context as the remote parent, and, when t is set, the attempt's
// span under it. end records the attempt's outcome from the answer and
// ends the span. log gets trace_id and span_id when the context has a
// span.
func (t *tracer) startAttempt(ctx context.Context, task *dexpb.Task, info TaskInfo, log *slog.Logger) (context.Context, *slog.Logger, func(*dexpb.PollWorkerTaskRequest)) {
	if tc := task.GetTraceContext(); len(tc) > 0 {
		ctx = propagator.Extract(ctx, propagation.MapCarrier(tc))
	}
	end := func(*dexpb.PollWorkerTaskRequest) {}
	if t != nil {
		attrs := []attribute.KeyValue{attrFlowType.String(info.FlowType), attrFlowID.String(info.FlowID),
			attrRunID.String(info.RunID), attrKind.String(info.Kind.String()), attrAttempt.Int(info.Attempt)}
		name := "dex." + kindName(info.Kind) + " " + info.StepType
		if info.RPCName != "" {
			name = "dex." + kindName(info.Kind) + " " + info.RPCName
			attrs = append(attrs, attrRPC.String(info.RPCName))
		} else {
			attrs = append(attrs, attrStepType.String(info.StepType), attrStepExecID.String(info.StepExecutionID))
		}
		var span trace.Span
		ctx, span = t.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
		end = func(msg *dexpb.PollWorkerTaskRequest) {
			if f := msg.GetTaskFailure(); f != nil {
				outcome := "failed"
				if f.GetNonRetryable() {
					outcome = "failed_non_retryable"
				}
				span.SetAttributes(attrOutcome.String(outcome), attrErrorType.String(f.GetErrorType()))
				span.SetStatus(codes.Error, f.GetMessage())
			} else {
				span.SetAttributes(attrOutcome.String("completed"))
			}
			span.End()
		}
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		log = log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	}
	return ctx, log, end
}

// kindName names a task kind in span names: WaitFor, Execute, RPC.
func kindName(k TaskKind) string {
	switch k {
	case KindWaitFor:
		return "WaitFor"
	case KindExecute:
		return "Execute"
	case KindRPC:
		return "RPC"
	}
	return k.String()
}
