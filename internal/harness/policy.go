package harness

import (
	"errors"
	"fmt"
	"time"

	"github.com/reinsdev/reins/backoff"
	"github.com/reinsdev/reins/internal/model"
	ma "github.com/reinsdev/reins/managedagents"
)

// RetryPolicy bounds the harness's own retries of failed model calls.
type RetryPolicy struct {
	// MaxAttempts is the number of tries of one model call, the first
	// included (default 4).
	MaxAttempts int
	// BaseDelay bounds the first backoff (default 1 s); each retry doubles
	// the bound up to MaxDelay (default 30 s). The wait is drawn with full
	// jitter, uniform between zero and the bound (package backoff).
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 4
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = time.Second
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	return p
}

// Delay returns the wait before retry number attempt (1 = the wait after
// the first failure). A positive retryAfter from the API is honoured as a
// floor.
func (p RetryPolicy) Delay(attempt int, retryAfter time.Duration) time.Duration {
	p = p.withDefaults()
	d := backoff.Policy{Base: p.BaseDelay, Max: p.MaxDelay}.Delay(attempt)
	return max(d, retryAfter)
}

// failure is a classified turn failure: what session.error to emit and
// whether a retry may help.
type failure struct {
	errType   string
	message   string
	retryable bool
	// retryAfter is the delay asked for by the API.
	retryAfter time.Duration
	// mcpServer names the MCP server of an MCP failure.
	mcpServer string
	// credentialID and vaultID name the credential of a credential
	// failure.
	credentialID, vaultID string
}

// classify maps an error from a model call to the session error model:
// the session.error type, and whether a retry may help (retry_status
// retrying, else exhausted; see "What a session.error means" in the
// README).
func classify(err error) failure {
	if f, ok := mcpFailure(err); ok {
		return f
	}
	if f, ok := credentialFailure(err); ok {
		return f
	}
	var me *model.Error
	if !errors.As(err, &me) {
		return failure{errType: ma.ErrorModelRequestFailed, message: "model request failed: " + err.Error(), retryable: true}
	}
	f := failure{message: me.Message, retryable: me.Kind.Retryable(), retryAfter: me.RetryAfter}
	switch me.Kind {
	case model.KindOverloaded:
		f.errType = ma.ErrorModelOverloaded
	case model.KindRateLimited:
		f.errType = ma.ErrorModelRateLimited
	case model.KindBilling:
		f.errType = ma.ErrorBilling
	default:
		f.errType = ma.ErrorModelRequestFailed
	}
	if me.StatusCode != 0 && f.message != "" {
		f.message = fmt.Sprintf("%s (HTTP %d)", f.message, me.StatusCode)
	}
	return f
}
