package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/reinsdev/reins/internal/model"
)

// The spans' names and attributes; the README lists them.
const (
	SpanTurn      = "reins.turn"
	SpanModelCall = "reins.model_call"
	SpanToolCall  = "reins.tool_call"

	AttrSessionID = "reins.session_id"
	AttrOutcome   = "reins.outcome"
	AttrModel     = "reins.model"
	AttrProvider  = "reins.provider"
	AttrTool      = "reins.tool"
	AttrMCPServer = "reins.mcp_server"
)

// toolMCP is the tool label of every MCP tool: their names are the
// servers', unbounded, so only traces tell them apart.
const toolMCP = "mcp"

// Observer reports the harness's work to the metrics and the traces, each
// optional; it implements harness.Observer.
type Observer struct {
	m      *Metrics
	tracer trace.Tracer
}

// NewObserver returns an Observer feeding m and t (either may be nil).
func NewObserver(m *Metrics, t *Tracing) *Observer {
	o := &Observer{m: m}
	if t != nil {
		o.tracer = t.tracer
	}
	return o
}

// span starts a span when traces are on.
func (o *Observer) span(parent context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if o.tracer == nil {
		return parent, nil
	}
	return o.tracer.Start(parent, name, trace.WithAttributes(attrs...))
}

// endSpan ends s (if any) with its outcome; failed marks it an error.
func endSpan(s trace.Span, outcome string, failed bool) {
	if s == nil {
		return
	}
	s.SetAttributes(attribute.String(AttrOutcome, outcome))
	if failed {
		s.SetStatus(codes.Error, outcome)
	}
	s.End()
}

// Turn implements harness.Observer.
func (o *Observer) Turn(parent context.Context, sessionID string) (context.Context, func(string)) {
	start := time.Now()
	ctx, s := o.span(parent, SpanTurn, attribute.String(AttrSessionID, sessionID))
	return ctx, func(outcome string) {
		if o.m != nil {
			o.m.turns.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
		}
		endSpan(s, outcome, outcome == "retries_exhausted" || outcome == "terminated")
	}
}

// ModelCall implements harness.Observer.
func (o *Observer) ModelCall(parent context.Context, sessionID, modelID string) (context.Context, func(string)) {
	start := time.Now()
	provider := model.ProviderName(modelID)
	ctx, s := o.span(parent, SpanModelCall, attribute.String(AttrSessionID, sessionID),
		attribute.String(AttrModel, modelID), attribute.String(AttrProvider, provider))
	return ctx, func(outcome string) {
		if o.m != nil {
			o.m.modelCalls.WithLabelValues(provider, outcome).Observe(time.Since(start).Seconds())
		}
		endSpan(s, outcome, outcome == "error")
	}
}

// ToolCall implements harness.Observer.
func (o *Observer) ToolCall(parent context.Context, sessionID, tool, mcpServer string) (context.Context, func(string)) {
	start := time.Now()
	label := tool
	attrs := []attribute.KeyValue{attribute.String(AttrSessionID, sessionID), attribute.String(AttrTool, tool)}
	if mcpServer != "" {
		label = toolMCP
		attrs = append(attrs, attribute.String(AttrMCPServer, mcpServer))
	}
	ctx, s := o.span(parent, SpanToolCall, attrs...)
	return ctx, func(outcome string) {
		if o.m != nil {
			o.m.toolCalls.WithLabelValues(label, outcome).Observe(time.Since(start).Seconds())
		}
		endSpan(s, outcome, outcome == "error")
	}
}

// SessionError implements harness.Observer.
func (o *Observer) SessionError(errType, retryStatus string) {
	if o.m != nil {
		o.m.sessionErrors.WithLabelValues(errType, retryStatus).Inc()
	}
}

// LeaseTakeover implements harness.Observer.
func (o *Observer) LeaseTakeover(string, string) {
	if o.m != nil {
		o.m.takeovers.Inc()
	}
}
