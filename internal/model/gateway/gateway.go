// Package gateway is the model gateway of agent ends: an agent end calls
// the session's model through reins with a short-lived model token, in
// the provider's own wire format (the Anthropic Messages API for claude-*
// models, the OpenAI Chat Completions API for openai/* models), so that it
// never holds the provider's keys. reins forwards the call to the provider
// it is configured with, retries what the session error model retries
// before any byte reaches the agent end, and records each attempt in the
// session (a model request span with the usage, session.errors) through
// the turn's runner.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/classify"
)

// Path prefixes of the gateway: the base URLs of the model grants. The
// official SDKs append "v1/messages" (Anthropic) and "chat/completions"
// (OpenAI) to them.
const (
	AnthropicPrefix = "/v1/gateway/anthropic"
	OpenAIPrefix    = "/v1/gateway/openai"
)

// MaxBody bounds a request's body (the Messages API's own limit is 32 MB).
const MaxBody = 32 << 20

// maxResponse bounds a non-streamed response and one event of a stream.
const maxResponse = 64 << 20

// Errors of Turns.ModelTurn that the gateway answers with 401.
var (
	ErrTokenExpired = errors.New("the model token expired: get a fresh one with model_token.refresh")
	ErrTokenInvalid = errors.New("the model token is not valid")
	ErrTurnInactive = errors.New("the turn this model token was issued for is not running (turn_inactive)")
)

// Turns finds the running turn a model token was issued for.
type Turns interface {
	// ModelTurn verifies token and returns its turn: ErrTokenExpired,
	// ErrTokenInvalid or ErrTurnInactive (possibly wrapped) when it
	// cannot be used.
	ModelTurn(ctx context.Context, token string) (Turn, error)
}

// Turn records the gateway calls of one running agent-end turn in its
// session, through the session's runner.
type Turn interface {
	// Model is the id of the session agent's model ("claude-…",
	// "openai/…").
	Model() string
	// StartModelRequest appends span.model_request_start and returns its
	// id. ErrTurnInactive (wrapped) once the turn ended.
	StartModelRequest(ctx context.Context) (string, error)
	// EndModelRequest closes the span with the call's usage (added to
	// the session's totals); failed marks a stream cut short.
	EndModelRequest(ctx context.Context, span string, usage model.Usage, failed bool) error
	// FailModelRequest closes the span of a failed attempt (number
	// attempt, from 1) and applies the session's retry policy: a
	// retrying session.error and the delay before the next attempt, or
	// (retry false) an exhausted one that ends the turn.
	FailModelRequest(ctx context.Context, span string, err *model.Error, attempt int) (delay time.Duration, retry bool, _ error)
}

// Config configures a Gateway.
type Config struct {
	// Models are the server's providers (with their concurrency limits);
	// the "anthropic" and "openai" ones must implement model.Upstream.
	Models model.Router
	Turns  Turns
	Logger *slog.Logger
}

// Gateway serves the model gateway's paths.
type Gateway struct {
	cfg Config
	log *slog.Logger
	now func() time.Time
}

// New returns a Gateway.
func New(cfg Config) *Gateway {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{cfg: cfg, log: log, now: time.Now}
}

// Grant returns the provider and the model name (as the provider's API
// names it) of a model grant for the agent model modelID, or an error
// saying why the gateway does not serve it.
func Grant(modelID string) (provider, name string, err error) {
	switch p := model.ProviderName(modelID); {
	case p == "openai":
		return p, strings.TrimPrefix(modelID, "openai/"), nil
	case p == "anthropic" && strings.HasPrefix(modelID, "claude-"):
		return p, modelID, nil
	}
	return "", "", fmt.Errorf("the model gateway serves claude-* models (Anthropic Messages API at %s) and openai/* models (Chat Completions at %s), not %q", AnthropicPrefix, OpenAIPrefix, modelID)
}

// BaseURL returns the base URL of a grant for provider on a server whose
// API is at serverURL.
func BaseURL(serverURL, provider string) string {
	prefix := AnthropicPrefix
	if provider == "openai" {
		prefix = OpenAIPrefix
	}
	return strings.TrimSuffix(serverURL, "/") + prefix
}

// ServeHTTP serves POST {AnthropicPrefix}/v1/messages and POST
// {OpenAIPrefix}/chat/completions (and /v1/chat/completions).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var api wire
	switch p := r.URL.Path; {
	case p == AnthropicPrefix+"/v1/messages":
		api = anthropicWire{}
	case p == OpenAIPrefix+"/chat/completions" || p == OpenAIPrefix+"/v1/chat/completions":
		api = openaiWire{}
	case strings.HasPrefix(p, OpenAIPrefix):
		openaiWire{}.writeError(w, http.StatusNotFound, "not_found_error", "the model gateway serves POST "+OpenAIPrefix+"/chat/completions")
		return
	default:
		anthropicWire{}.writeError(w, http.StatusNotFound, "not_found_error", "the model gateway serves POST "+AnthropicPrefix+"/v1/messages and POST "+OpenAIPrefix+"/chat/completions")
		return
	}
	if r.Method != http.MethodPost {
		api.writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method "+r.Method+" is not allowed: use POST")
		return
	}
	g.serve(w, r, api)
}

// call is one request to the gateway, checked.
type call struct {
	api  wire
	turn Turn
	body []byte
	// path and header are what goes upstream.
	path   string
	header http.Header
	// strip is set when the gateway asked an OpenAI stream for usage
	// that the client did not ask for: the usage chunk is not passed on.
	strip bool
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, api wire) {
	c, status, errType, msg := g.check(r, api)
	if status != 0 {
		api.writeError(w, status, errType, msg)
		return
	}
	up, err := g.cfg.Models.Upstream(api.provider())
	if err != nil {
		api.writeError(w, http.StatusServiceUnavailable, "api_error", err.Error())
		return
	}
	for attempt := 1; ; attempt++ {
		span, err := c.turn.StartModelRequest(r.Context())
		if err != nil {
			g.refuseTurn(w, api, err)
			return
		}
		res, err := up.Forward(r.Context(), c.path, c.header, c.body)
		if err == nil && res.StatusCode < 400 {
			g.pass(w, r, c, span, res)
			return
		}
		me, body := g.failure(r.Context(), res, err)
		if r.Context().Err() != nil {
			_ = c.turn.EndModelRequest(context.WithoutCancel(r.Context()), span, model.Usage{}, true)
			return // the agent end went away
		}
		delay, retry, rerr := c.turn.FailModelRequest(r.Context(), span, me, attempt)
		if rerr != nil {
			g.refuseTurn(w, api, rerr)
			return
		}
		if !retry {
			g.log.Info("model gateway call failed", "model", c.turn.Model(), "attempts", attempt, "err", me)
			g.writeFailure(w, api, res, body, me)
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
}

// check authenticates r and reads its body; a non-zero status refuses it.
func (g *Gateway) check(r *http.Request, api wire) (c call, status int, errType, msg string) {
	token := Token(r)
	if token == "" {
		return c, http.StatusUnauthorized, "authentication_error", "a model token is required (x-api-key or Authorization: Bearer)"
	}
	turn, err := g.cfg.Turns.ModelTurn(r.Context(), token)
	switch {
	case errors.Is(err, ErrTokenExpired), errors.Is(err, ErrTokenInvalid), errors.Is(err, ErrTurnInactive):
		return c, http.StatusUnauthorized, "authentication_error", err.Error()
	case err != nil:
		return c, http.StatusInternalServerError, "api_error", "checking the model token: " + err.Error()
	}
	provider, name, err := Grant(turn.Model())
	switch {
	case err != nil:
		return c, http.StatusBadRequest, "invalid_request_error", err.Error()
	case provider != api.provider():
		return c, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("the session's model %s is served at %s, not here", turn.Model(), BaseURL("", provider))
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return c, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("the request body is over %d bytes", MaxBody)
	case err != nil:
		return c, http.StatusBadRequest, "invalid_request_error", "reading the request body: " + err.Error()
	}
	var head struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return c, http.StatusBadRequest, "invalid_request_error", "the request body is not a JSON object: " + err.Error()
	}
	if head.Model != name {
		return c, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("model %q: this model token serves the session's model %q only", head.Model, name)
	}
	c = call{api: api, turn: turn, body: body, path: api.path(), header: api.forwardHeader(r.Header)}
	if r.URL.RawQuery != "" {
		c.path += "?" + r.URL.RawQuery // the SDKs' beta paths ask ?beta=true
	}
	if head.Stream {
		if c.body, c.strip, err = api.askUsage(body); err != nil {
			return c, http.StatusBadRequest, "invalid_request_error", err.Error()
		}
	}
	return c, 0, "", ""
}

// Token returns the model token of a gateway request: its x-api-key, or
// its Authorization: Bearer.
func Token(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}

// refuseTurn answers a call whose turn ended meanwhile.
func (g *Gateway) refuseTurn(w http.ResponseWriter, api wire, err error) {
	if errors.Is(err, ErrTurnInactive) {
		api.writeError(w, http.StatusUnauthorized, "authentication_error", ErrTurnInactive.Error())
		return
	}
	api.writeError(w, http.StatusInternalServerError, "api_error", "recording the model call: "+err.Error())
}

// failure classifies a failed attempt: an error response (its body read,
// returned for the client) or no response.
func (g *Gateway) failure(ctx context.Context, res *http.Response, err error) (*model.Error, []byte) {
	if err != nil {
		if me, ok := errors.AsType[*model.Error](classify.Transport(ctx, err)); ok {
			return me, nil
		}
		return &model.Error{Kind: model.KindRequestFailed, Message: err.Error(), Err: err}, nil
	}
	defer res.Body.Close()
	body, rerr := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	f := classify.Failure{Status: res.StatusCode, Header: res.Header}
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		f.Type, f.Message = e.Error.Type, e.Error.Message
		if s, ok := e.Error.Code.(string); ok {
			f.Code = s
		}
	}
	if rerr != nil {
		body = nil
	}
	return f.Error(fmt.Errorf("model API answered %d", res.StatusCode), g.now()), body
}

// writeFailure gives the client the upstream's error response (its status
// and body), or a 502 in the API's shape when no response came.
func (g *Gateway) writeFailure(w http.ResponseWriter, api wire, res *http.Response, body []byte, me *model.Error) {
	if res == nil || body == nil {
		api.writeError(w, http.StatusBadGateway, "api_error", me.Message)
		return
	}
	copyHeaders(w.Header(), res.Header)
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(body)
}

// passedHeaders are the response headers the client gets from the
// provider.
var passedHeaders = []string{"Content-Type", "Request-Id", "X-Request-Id", "Retry-After", "Retry-After-Ms"}

func copyHeaders(dst, src http.Header) {
	for _, k := range passedHeaders {
		if v := src.Values(k); len(v) > 0 {
			dst[k] = v
		}
	}
}
