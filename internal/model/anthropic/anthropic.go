// Package anthropic is a model.Provider for the Anthropic Messages API,
// built on the official SDK. It streams every call, maps the reins
// transcript onto Messages API content blocks with prompt-caching
// breakpoints, and classifies every failure into a *model.Error. It never
// retries: the harness owns the retry policy.
package anthropic

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/idle"
)

// DefaultIdleTimeout is how long a call may receive nothing before it fails.
// The API sends ping events while a response is slow, so a healthy stream
// is never silent this long.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultModel is the model id reins suggests for Anthropic agents (the demo
// agent's model when an API key is set): the SDK's current Sonnet, so that
// it moves with SDK upgrades (staticcheck flags it once the SDK deprecates
// it).
const DefaultModel = anthropic.ModelClaudeSonnet5_5

// DefaultMaxTokens bounds a response when neither the request nor Options
// set a limit.
const DefaultMaxTokens = 8192

// Options configure a Provider.
type Options struct {
	// APIKey authenticates the calls (the SDK sends it as a bearer token);
	// "" sends no credentials, for a proxy that adds its own.
	APIKey string
	// BaseURL overrides https://api.anthropic.com (for proxies and tests).
	BaseURL string
	// HTTPClient performs the requests; nil means a client with no overall
	// timeout (a streamed response may legitimately take minutes; bound a
	// call with its context instead).
	HTTPClient *http.Client
	// MaxTokens is the default response bound; 0 means DefaultMaxTokens.
	MaxTokens int
	// IdleTimeout fails a call (KindRequestFailed) when the API sends
	// nothing, neither response headers nor stream data, for this long;
	// 0 means DefaultIdleTimeout and a negative value disables it.
	IdleTimeout time.Duration
	// Logger receives debug records of each call; nil discards them.
	Logger *slog.Logger
}

// Provider calls the Anthropic Messages API. It is safe for concurrent use.
type Provider struct {
	client    anthropic.Client
	maxTokens int
	log       *slog.Logger
	now       func() time.Time
	idle      time.Duration
	// official is set when the provider calls api.anthropic.com (no
	// BaseURL).
	official bool
}

var _ model.Provider = (*Provider)(nil)

// Accepts implements model.Acceptor: the Anthropic API serves Claude
// models only, whose ids all start with "claude-". Behind another base URL
// (a compatible proxy or gateway) any id may be served.
func (p *Provider) Accepts(modelID string) error {
	if p.official && !strings.HasPrefix(modelID, "claude-") {
		return errors.New(`the anthropic provider calls the Anthropic API, which serves Claude models only ("claude-…")`)
	}
	return nil
}

// New returns a Provider configured by opts. It reads no environment
// variables: the caller resolves flags and environment into opts.
func New(opts Options) *Provider {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	ropts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		// The harness owns every retry (harness.RetryPolicy).
		option.WithMaxRetries(0),
	}
	if opts.APIKey != "" {
		ropts = append(ropts, option.WithAPIKey(opts.APIKey))
	}
	if opts.BaseURL != "" {
		ropts = append(ropts, option.WithBaseURL(opts.BaseURL))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{
		client:    anthropic.NewClient(ropts...),
		official:  opts.BaseURL == "",
		maxTokens: cmp.Or(opts.MaxTokens, DefaultMaxTokens),
		log:       log,
		now:       time.Now,
		idle:      cmp.Or(opts.IdleTimeout, DefaultIdleTimeout),
	}
}

// Stream implements model.Provider. It sends req as one streamed Messages
// API call, reports text deltas and thinking to sink, and returns the
// complete response. A failure is a *model.Error, except when ctx ends
// first: then the error wraps ctx.Err().
func (p *Provider) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	if sink == nil {
		sink = model.DiscardSink{}
	}
	params, ropts, err := p.params(req)
	if err != nil {
		return nil, err
	}
	start := p.now()
	wd := idle.Start(ctx, p.idle)
	defer wd.Stop()
	ropts = append(ropts, option.WithMiddleware(wd.Middleware))
	stream := p.client.Messages.NewStreaming(wd.Context(), params, ropts...)
	defer stream.Close()

	acc := newAccumulator(sink, p.log)
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		cerr := p.classify(ctx, wd, err)
		p.log.DebugContext(ctx, "anthropic call failed", "model", req.Model, "session", req.SessionID, "err", cerr, "elapsed", p.now().Sub(start))
		return nil, cerr
	}
	resp, err := acc.response(ctx)
	if err != nil {
		p.log.DebugContext(ctx, "anthropic call failed", "model", req.Model, "session", req.SessionID, "err", err, "elapsed", p.now().Sub(start))
		return nil, err
	}
	p.log.DebugContext(ctx, "anthropic call done", "model", req.Model, "session", req.SessionID,
		"stop_reason", resp.StopReason, "input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"cache_read", resp.Usage.CacheReadInputTokens, "cache_creation", resp.Usage.CacheCreationInputTokens,
		"elapsed", p.now().Sub(start))
	return resp, nil
}
