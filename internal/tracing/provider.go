package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dexzd/dexzd/internal/config"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of the server's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceName = "dex-server-zd"

// InstrumentationName names the server's tracer.
const InstrumentationName = "github.com/dexzd/dexzd"

// Enabled reports whether tracing is on for cfg and the environment:
// tracing.endpoint or an OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and OTEL_SDK_DISABLED is not
// true.
func Enabled(cfg *config.Config, getenv func(string) string) bool {
	if v, _ := strconv.ParseBool(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); v {
		return false
	}
	return cfg.Tracing.Endpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
		getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Provider is the process's tracer provider, nil (no tracing) unless
// Enabled.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// NewProvider returns the tracer provider for cfg: spans batched and sent
// over OTLP/gRPC to tracing.endpoint (or where the OTEL_EXPORTER_OTLP_*
// variables say), sampled parent-based at tracing.sampleRatio when the
// file sets it (else as OTEL_TRACES_SAMPLER says, else all), with the
// resource service.name=dex-server-zd and dex.node_id, overridden by
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. It returns nil, nil when
// tracing is off. Nothing is dialled here: an unreachable receiver loses
// spans (the exporter logs through the otel error handler), it never
// delays the node.
func NewProvider(ctx context.Context, cfg *config.Config) (*Provider, error) {
	if !Enabled(cfg, os.Getenv) {
		return nil, nil
	}
	var opts []otlptracegrpc.Option
	if cfg.Tracing.Endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Tracing.Endpoint))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", ServiceName), attribute.String("dex.node_id", cfg.NodeID)),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if cfg.IsSet("tracing.sampleRatio") {
		popts = append(popts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Tracing.SampleRatio))))
	}
	return &Provider{tp: sdktrace.NewTracerProvider(popts...)}, nil
}

// TracerProvider returns the provider, nil when p is nil (tracing off).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.tp
}

// Shutdown flushes the spans not sent yet, for at most 5 s; nil p does
// nothing.
func (p *Provider) Shutdown() error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush spans: %w", err)
	}
	return nil
}
