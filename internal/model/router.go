package model

import (
	"context"
	"fmt"
	"slices"
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

// Acceptor is implemented by the providers that know, without a call,
// that some model ids are not theirs.
type Acceptor interface {
	// Accepts returns an error saying why modelID is not served.
	Accepts(modelID string) error
}

// Check reports whether a configured provider serves modelID: the provider
// the id routes to (see [ProviderName]) must be configured and, if it is
// an [Acceptor], accept the id. The error names the configured providers.
// Whether the model exists upstream is known only when it is called.
func (r Router) Check(modelID string) error {
	name := ProviderName(modelID)
	p := r[name]
	if p == nil {
		return fmt.Errorf("model %q needs the %s provider, which is not configured on this server (%s)", modelID, name, r.configured())
	}
	if a, ok := p.(Acceptor); ok {
		if err := a.Accepts(modelID); err != nil {
			return fmt.Errorf("model %q is not served by this server: %w (%s)", modelID, err, r.configured())
		}
	}
	return nil
}

// configured describes the configured providers and how ids route.
func (r Router) configured() string {
	var names []string
	for name, p := range r {
		if p != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return fmt.Sprintf("configured providers: %s; ids route by prefix: \"openai/<model>\" to openai, \"scripted\" and \"scripted/<name>\" to scripted, any other id to anthropic",
		strings.Join(names, ", "))
}

// Stream implements Provider.
func (r Router) Stream(ctx context.Context, req *Request, sink Sink) (*Response, error) {
	p := r[ProviderName(req.Model)]
	if err := r.Check(req.Model); err != nil {
		return nil, &Error{Kind: KindInvalid, Message: err.Error()}
	}
	return p.Stream(ctx, req, sink)
}
