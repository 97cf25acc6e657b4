package server

import (
	"strings"

	"github.com/dexzd/dexzd/internal/tracing"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// tracingOptions trace the API calls when Options.TracerProvider is set:
// a server span per call, the child of the caller's span when the call
// carries a W3C traceparent. The worker stream (PollWorkerTask, open for
// a worker's whole session) and health checks are not traced: a worker's
// attempts are traced under their flow's trace instead (package tracing).
func (s *Server) tracingOptions() []grpc.ServerOption {
	tp := s.opts.TracerProvider
	if tp == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(tracing.Propagator),
		otelgrpc.WithFilter(tracedCall),
	))}
}

// Tracer returns the server's tracer for the spans of its log writes and
// applies, nil when tracing is off.
func (s *Server) Tracer() trace.Tracer {
	if s.opts.TracerProvider == nil {
		return nil
	}
	return s.opts.TracerProvider.Tracer(tracing.InstrumentationName)
}

// tracedCall reports whether a call is traced: every call of the Dex
// services but the worker stream.
func tracedCall(info *stats.RPCTagInfo) bool {
	m := info.FullMethodName
	return strings.HasPrefix(m, "/dex.") && !strings.HasSuffix(m, "/PollWorkerTask")
}
