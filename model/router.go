package model

import (
	"context"
	"fmt"
	"strings"
)

// Router is a Provider that dispatches each request to the provider
// registered for the request's model id. A model id "scripted" or
// "scripted/<name>" goes to the "scripted" provider, "openai/<model>" to
// "openai", and anything else (for example "claude-sonnet-5-5") to
// "anthropic".
type Router map[string]Provider

// ProviderName returns the name of the provider that serves modelID.
func ProviderName(modelID string) string {
	switch {
	case modelID == "scripted" || strings.HasPrefix(modelID, "scripted/"):
		return "scripted"
	case strings.HasPrefix(modelID, "openai/"):
		return "openai"
	default:
		return "anthropic"
	}
}

// Stream implements Provider.
func (r Router) Stream(ctx context.Context, req *Request, sink Sink) (*Response, error) {
	name := ProviderName(req.Model)
	p, ok := r[name]
	if !ok || p == nil {
		return nil, &Error{Kind: KindInvalid, Message: fmt.Sprintf("model %q needs the %s provider, which is not configured on this server", req.Model, name)}
	}
	return p.Stream(ctx, req, sink)
}
