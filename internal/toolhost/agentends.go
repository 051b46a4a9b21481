package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	"github.com/reinsdev/reins/internal/turntoken"
	ma "github.com/reinsdev/reins/managedagents"
)

// agentEnds starts the turns of sessions served by agent ends on the
// executor hub: an agent end of the session's environment (environment
// key) or of a machine whose scope holds the environment (machine token).
// It implements harness.AgentEnds.
type agentEnds struct {
	hub    *executorhub.Hub
	st     machineLister
	tokens *turntoken.Issuer
	models model.Router  // what the model gateway forwards to
	hands  *replicaHands // replicas only: moves sessions to their agent ends' replica
}

// AgentEnds returns the harness's AgentEnds: turns go to agent ends on the
// host's executor hub, with tokens for the model gateway (serving models)
// and for the platform tools endpoint.
func (t *Host) AgentEnds(tokens *turntoken.Issuer, models model.Router) harness.AgentEnds {
	return agentEnds{hub: t.hub, st: t.st, tokens: tokens, models: models, hands: t.hands}
}

// StartTurn implements harness.AgentEnds.
func (a agentEnds) StartTurn(ctx context.Context, sess *ma.Session, start harness.TurnStart, sink harness.TurnSink) (harness.AgentTurn, *tool.Wait, error) {
	machines, err := a.machinesOf(ctx, sess.EnvironmentID)
	if err != nil {
		return nil, nil, err
	}
	changed := []<-chan struct{}{a.hub.Changed(sess.EnvironmentID)}
	for _, m := range machines {
		changed = append(changed, a.hub.ChangedMachine(m))
	}
	rs := rpcSink{TurnSink: sink, tokens: a.tokens, models: a.models, model: sess.Agent.Model.ID, sessionID: sess.ID, turnID: start.TurnID, tools: len(harness.BuiltinTools(&sess.Agent)) > 0}
	st := executor.TurnStart{SessionID: sess.ID, TurnID: start.TurnID, Inputs: start.Inputs, Transcript: start.Transcript, Agent: start.Agent}
	if g, err := rs.toolsGrant(); err == nil {
		st.Tools = &g
	}
	if g, err := rs.RefreshModelToken(ctx); err == nil {
		st.Model = &g
	}
	req := executorhub.AgentTurnRequest{EnvironmentID: sess.EnvironmentID, MachineIDs: machines, Start: st, Sink: rs}
	if d := start.Delta; d != nil {
		req.Delta = &executorhub.TranscriptDelta{ExecutorID: d.Holder, Base: d.Base, Since: d.Since, Events: d.Events}
	}
	t, err := a.hub.StartTurn(ctx, req)
	var re *executor.RPCError
	switch {
	case errors.Is(err, executorhub.ErrNoAgentEnd):
		wait, err := a.noAgentEnd(ctx, sess.ID, sess.EnvironmentID, changed)
		return nil, wait, err
	case errors.As(err, &re):
		return nil, nil, refusal(re)
	case err != nil:
		return nil, nil, err
	}
	return t, nil, nil
}

// refusal is an agent end's refusal of a turn.start for the harness: the
// session.error type is data.reason, retried when data.retryable.
func refusal(re *executor.RPCError) *harness.TurnRefusedError {
	e := &harness.TurnRefusedError{Type: re.Reason(), Message: re.Error(), Retryable: re.Retryable()}
	if re.Data != nil {
		e.MCPServer = re.Data.MCPServerName
	}
	return e
}

// noAgentEnd is StartTurn's answer when no agent end connected here may
// run the session's turn: with replicas, the session moves to one that
// announced an agent end of its environment (the runner, fenced off,
// leaves); otherwise it waits until one connects, here (changed) or at
// another replica.
func (a agentEnds) noAgentEnd(ctx context.Context, sessionID, envID string, changed []<-chan struct{}) (*tool.Wait, error) {
	wait := &tool.Wait{Reason: "waiting for an agent end of the session's environment to connect"}
	if a.hands == nil {
		wait.C = anyOf(ctx, changed)
		return wait, nil
	}
	key := agentKey(envID)
	// Subscribed before the database is read: an announcement made after
	// the read is not missed.
	sub := a.hands.bus.Subscribe(handsKey(key))
	to, err := a.hands.route(ctx, sessionID, key)
	if err != nil || to != "" {
		sub.Close()
		if err == nil {
			err = fmt.Errorf("the session moved to replica %s, where an agent end of environment %s is connected: %w", to, envID, store.ErrFenced)
		}
		return nil, err
	}
	wait.C = anyOf(ctx, append(changed, received(ctx, sub)))
	return wait, nil
}

// received returns a channel closed when sub receives; sub is closed
// then, or when ctx ends.
func received(ctx context.Context, sub *bus.Sub) <-chan struct{} {
	out := make(chan struct{})
	go func() { // owned by the caller: ends with ctx
		defer sub.Close()
		select {
		case <-sub.C:
			close(out)
		case <-ctx.Done():
		}
	}()
	return out
}

// rpcSink answers an agent end with the protocol's errors for the
// harness's refusals, and issues the turn's tokens. The hub has checked
// that the turn is running on the asking agent end (else turn_inactive
// or forbidden).
type rpcSink struct {
	harness.TurnSink
	tokens            *turntoken.Issuer
	models            model.Router
	model             string // the session agent's model id
	sessionID, turnID string
	tools             bool // the agent has built-in tools
}

// Append implements executorhub.TurnSink.
func (s rpcSink) Append(ctx context.Context, events []json.RawMessage) error {
	err := s.TurnSink.Append(ctx, events)
	var ie *harness.InvalidEventsError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, harness.ErrTurnInactive):
		return detailed(executor.WithReason(executor.CodeSessionNotActive, executor.ReasonTurnInactive, ""), err.Error())
	case errors.As(err, &ie):
		return detailed(executor.NewRPCError(executor.CodeInvalidParams, ""), ie.Detail)
	}
	return err
}

// RefreshModelToken implements executorhub.TurnSink: a fresh model token
// for the model gateway, or model_token_unavailable when the gateway does
// not serve the session's model.
func (s rpcSink) RefreshModelToken(context.Context) (executor.TokenGrant, error) {
	return modelGrant(s.tokens, s.models, s.model, s.sessionID, s.turnID)
}

// RefreshToolsToken implements executorhub.TurnSink: a fresh tools token,
// or tools_token_unavailable when the agent has no built-in tools.
func (s rpcSink) RefreshToolsToken(context.Context) (executor.TokenGrant, error) {
	return s.toolsGrant()
}

// toolsGrant issues a tools token of the turn for the platform tools
// endpoint (its URL a path the hub resolves).
func (s rpcSink) toolsGrant() (executor.TokenGrant, error) {
	if !s.tools || s.tokens == nil {
		return executor.TokenGrant{}, detailed(executor.WithReason(executor.CodeResourceUnavailable, executor.ReasonToolsTokenUnavailable, ""),
			"the session's agent has no built-in tools: there is nothing for the platform tools endpoint to run")
	}
	tok, exp, err := s.tokens.Issue(turntoken.Tools, s.sessionID, s.turnID)
	if err != nil {
		return executor.TokenGrant{}, detailed(executor.WithReason(executor.CodeResourceUnavailable, executor.ReasonToolsTokenUnavailable, ""), err.Error())
	}
	return executor.TokenGrant{URL: turntoken.ToolsPath(s.sessionID), Token: tok, ExpiresAt: exp}, nil
}

// machinesOf lists the live machines whose scope holds the environment.
func (a agentEnds) machinesOf(ctx context.Context, envID string) ([]string, error) {
	ms, err := a.st.ListMachines(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range ms {
		if m.RevokedAt == nil && slices.Contains(m.EnvironmentIDs, envID) {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// detailed sets the error's data.detail.
func detailed(e *executor.RPCError, detail string) *executor.RPCError {
	if e.Data == nil {
		e.Data = &executor.JSONRPCErrorData{}
	}
	e.Data.Detail = detail
	return e
}

// anyOf returns a channel closed when one of chs is closed or ctx ends.
func anyOf(ctx context.Context, chs []<-chan struct{}) <-chan struct{} {
	if len(chs) == 1 {
		return chs[0]
	}
	out := make(chan struct{})
	var once sync.Once
	for _, ch := range chs {
		go func() { // owned by the caller: ends with ctx, or once out closes
			select {
			case <-ch:
			case <-out:
				return
			case <-ctx.Done():
			}
			once.Do(func() { close(out) })
		}()
	}
	return out
}
