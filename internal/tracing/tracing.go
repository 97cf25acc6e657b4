// Package tracing is the server's OpenTelemetry tracing: the tracer
// provider built from the tracing.* keys and the standard OTEL_*
// environment variables (provider.go), the trace context a traced run
// keeps and its tasks carry (this file), and the log handler that puts
// trace and span IDs on log lines (log.go).
//
// # Where a flow's trace lives
//
// A client's call arrives with its trace context in the gRPC metadata
// (W3C traceparent); the server's span of the call (otelgrpc) is its
// child. A StartFlow whose span is sampled stores that span's context in
// the run (engine.FlowStarted.TraceContext, then FlowState.TraceContext):
// it is part of the durable start record, so it survives a restart, a
// replay, a snapshot and a takeover, and every task of the run, whenever
// and by whichever process it is built, carries it to the worker
// (dexpb.Task.trace_context), whose attempt spans are its children. A
// start that is not traced stores nothing: zero bytes in the record and
// the state.
//
// The log write and the apply of an envelope are recorded as spans under
// the call that submitted it, or, for work of no traced call (a worker's
// result, a timer), under the run's stored context (package wal:
// WriterConfig.Tracer).
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagator is the one format trace contexts travel in, in gRPC metadata
// and in tasks: W3C Trace Context.
var Propagator = propagation.TraceContext{}

// Carrier returns the trace context of ctx's span as propagation carrier
// keys (traceparent, and tracestate when there is one), or nil when the
// span is not sampled: an untraced call keeps nothing.
func Carrier(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return nil
	}
	m := propagation.MapCarrier{}
	Propagator.Inject(ctx, m)
	return m
}

// SpanContextOf returns the span context kept in carrier m (Carrier), an
// invalid one when m holds none.
func SpanContextOf(m map[string]string) trace.SpanContext {
	if len(m) == 0 {
		return trace.SpanContext{}
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier(m))
	return trace.SpanContextFromContext(ctx)
}
