package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of the traces.
const ServiceName = "reins"

// exportTimeout bounds one export of a batch of spans.
const exportTimeout = 10 * time.Second

// TracingConfig configures the traces.
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP base URL (http or https, e.g.
	// http://collector:4318); spans go to its /v1/traces. Empty: the
	// exporter's standard variables (OTEL_EXPORTER_OTLP_ENDPOINT,
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) say where.
	Endpoint string
	// InstanceID is the service.instance.id of the traces: the replica.
	InstanceID string
}

// CheckEndpoint refuses an OTLP endpoint that is not an absolute http or
// https URL (the exporter would silently ignore it).
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an http or https URL such as http://127.0.0.1:4318, got %q", endpoint)
	}
	return nil
}

// Tracing sends spans to an OTLP/HTTP collector, in batches.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// NewTracing sets up the exporter. Nothing is sent before the first span
// ends; an unreachable collector costs dropped spans, never a stalled
// turn (the batch queue is bounded).
func NewTracing(ctx context.Context, cfg TracingConfig) (*Tracing, error) {
	opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(exportTimeout)}
	if cfg.Endpoint != "" {
		if err := CheckEndpoint(cfg.Endpoint); err != nil {
			return nil, fmt.Errorf("telemetry: otlp endpoint: %w", err)
		}
		u, err := url.JoinPath(cfg.Endpoint, "v1/traces")
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp endpoint: %w", err)
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", ServiceName), attribute.String("service.instance.id", cfg.InstanceID)))
	if err != nil {
		exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{tp: tp, tracer: tp.Tracer("github.com/reinsdev/reins")}, nil
}

// Start does nothing: the exporter runs from NewTracing, so that what is
// observed before Start is sent. It makes Tracing a service.
func (t *Tracing) Start(context.Context) error { return nil }

// Stop sends the spans not yet sent and stops the exporter, within ctx.
func (t *Tracing) Stop(ctx context.Context) error {
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flush traces: %w", err)
	}
	return nil
}
