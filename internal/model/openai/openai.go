// Package openai is a model.Provider for any OpenAI-compatible Chat
// Completions endpoint (OpenAI itself, vLLM, Ollama, LiteLLM, OpenRouter...),
// built on the official SDK. Model ids have the form "openai/<model>"; the
// prefix is stripped before the call. Every call streams, with
// stream_options.include_usage, and every failure is classified into a
// *model.Error. It never retries: the harness owns the retry policy.
package openai

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/idle"
)

// DefaultIdleTimeout is how long a call may receive nothing before it fails.
// It is generous because a local server may process a long prompt for
// minutes before its first chunk.
const DefaultIdleTimeout = 10 * time.Minute

// Prefix starts the model ids this provider serves.
const Prefix = "openai/"

// Options configure a Provider.
type Options struct {
	// APIKey is sent as a bearer token; "" sends none (local servers).
	APIKey string
	// BaseURL is the endpoint root including the version path, for example
	// "http://localhost:8000/v1"; "" means https://api.openai.com/v1.
	BaseURL string
	// HTTPClient performs the requests; nil means a client with no overall
	// timeout (bound a call with its context instead).
	HTTPClient *http.Client
	// IdleTimeout fails a call (KindRequestFailed) when the API sends
	// nothing, neither response headers nor stream data, for this long;
	// 0 means DefaultIdleTimeout and a negative value disables it.
	IdleTimeout time.Duration
	// Logger receives debug records of each call; nil discards them.
	Logger *slog.Logger
}

// Provider calls a Chat Completions endpoint. It is safe for concurrent use.
type Provider struct {
	completions openai.ChatCompletionService
	log         *slog.Logger
	now         func() time.Time
	idle        time.Duration
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider configured by opts. It reads no environment
// variables: the caller resolves flags and environment into opts.
func New(opts Options) *Provider {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	ropts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithHTTPClient(hc),
		// The harness owns every retry (harness.RetryPolicy).
		option.WithMaxRetries(0),
	}
	if opts.BaseURL != "" {
		ropts = append(ropts, option.WithBaseURL(opts.BaseURL))
	}
	if opts.APIKey != "" {
		ropts = append(ropts, option.WithAPIKey(opts.APIKey))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The service is built directly rather than through openai.NewClient,
	// which would read OPENAI_* variables from the environment.
	return &Provider{
		completions: openai.NewChatCompletionService(ropts...),
		log:         log,
		now:         time.Now,
		idle:        cmp.Or(opts.IdleTimeout, DefaultIdleTimeout),
	}
}

// Stream implements model.Provider. It sends req as one streamed chat
// completion, reports text deltas (always text block 0: a chat completion
// has one text part) and reasoning to sink, and returns the complete
// response. A failure is a *model.Error, except when ctx ends first: then
// the error wraps ctx.Err().
func (p *Provider) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	if sink == nil {
		sink = model.DiscardSink{}
	}
	params, err := params(req)
	if err != nil {
		return nil, err
	}
	start := p.now()
	wd := idle.Start(ctx, p.idle)
	defer wd.Stop()
	stream := p.completions.NewStreaming(wd.Context(), params, option.WithMiddleware(wd.Middleware))
	defer stream.Close()

	acc := newAccumulator(sink, p.log)
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		cerr := p.classify(ctx, wd, err)
		p.log.DebugContext(ctx, "openai call failed", "model", req.Model, "session", req.SessionID, "err", cerr, "elapsed", p.now().Sub(start))
		return nil, cerr
	}
	resp, err := acc.response(ctx)
	if err != nil {
		p.log.DebugContext(ctx, "openai call failed", "model", req.Model, "session", req.SessionID, "err", err, "elapsed", p.now().Sub(start))
		return nil, err
	}
	p.log.DebugContext(ctx, "openai call done", "model", req.Model, "session", req.SessionID,
		"stop_reason", resp.StopReason, "input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"cache_read", resp.Usage.CacheReadInputTokens, "elapsed", p.now().Sub(start))
	return resp, nil
}

// modelName strips Prefix from a model id.
func modelName(id string) string { return strings.TrimPrefix(id, Prefix) }
