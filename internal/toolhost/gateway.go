package toolhost

import (
	"context"
	"errors"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/gateway"
	"github.com/reinsdev/reins/internal/turntoken"
)

// Turns finds the agent-end turns running here (the harness).
type Turns interface {
	AgentTurn(sessionID, turnID string) (*harness.ActiveTurn, error)
}

// GatewayTurns returns the model gateway's gateway.Turns: the running
// agent-end turn of a model token.
func GatewayTurns(tokens *turntoken.Issuer, turns Turns) gateway.Turns {
	return gatewayTurns{tokens: tokens, h: turns}
}

// gatewayTurns finds the running agent-end turn of a model token for the
// model gateway. It implements gateway.Turns.
type gatewayTurns struct {
	tokens *turntoken.Issuer
	h      Turns
}

// ModelTurn implements gateway.Turns.
func (g gatewayTurns) ModelTurn(_ context.Context, token string) (gateway.Turn, error) {
	c, err := g.tokens.Verify(turntoken.Model, token)
	switch {
	case errors.Is(err, turntoken.ErrExpired):
		return nil, gateway.ErrTokenExpired
	case err != nil:
		return nil, gateway.ErrTokenInvalid
	}
	t, err := g.h.AgentTurn(c.SessionID, c.TurnID)
	if err != nil {
		return nil, gateway.ErrTurnInactive
	}
	return t, nil
}

// modelGrant issues a model token of the turn for the model gateway (its
// base URL a path the hub resolves), or model_token_unavailable when the
// gateway cannot serve the session's model.
func modelGrant(tokens *turntoken.Issuer, models model.Router, modelID, sessionID, turnID string) (executor.TokenGrant, error) {
	provider, name, err := gateway.Grant(modelID)
	if err == nil {
		_, err = models.Upstream(provider)
	}
	if err == nil && tokens == nil {
		err = errors.New("this server issues no turn tokens")
	}
	if err != nil {
		return executor.TokenGrant{}, detailed(executor.WithReason(executor.CodeResourceUnavailable, executor.ReasonModelTokenUnavailable, ""), err.Error())
	}
	tok, exp, err := tokens.Issue(turntoken.Model, sessionID, turnID)
	if err != nil {
		return executor.TokenGrant{}, detailed(executor.WithReason(executor.CodeResourceUnavailable, executor.ReasonModelTokenUnavailable, ""), err.Error())
	}
	return executor.TokenGrant{Provider: provider, Model: name, BaseURL: gateway.BaseURL("", provider), Token: tok, ExpiresAt: exp}, nil
}
