package app

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// agentEnds starts the turns of sessions served by agent ends on the
// executor hub: an agent end of the session's environment (environment
// key) or of a machine whose scope holds the environment (machine token).
// It implements harness.AgentEnds.
type agentEnds struct {
	hub *executor.Hub
	st  store.Store
}

// StartTurn implements harness.AgentEnds.
func (a agentEnds) StartTurn(ctx context.Context, sess *ma.Session, start harness.TurnStart, sink harness.TurnSink) (harness.AgentTurn, *harness.Wait, error) {
	machines, err := a.machinesOf(ctx, sess.EnvironmentID)
	if err != nil {
		return nil, nil, err
	}
	changed := []<-chan struct{}{a.hub.Changed(sess.EnvironmentID)}
	for _, m := range machines {
		changed = append(changed, a.hub.ChangedMachine(m))
	}
	t, err := a.hub.StartTurn(ctx, executor.AgentTurnRequest{EnvironmentID: sess.EnvironmentID, MachineIDs: machines,
		Start: executor.TurnStart{SessionID: sess.ID, Inputs: start.Inputs, Transcript: start.Transcript, Agent: start.Agent},
		Sink:  rpcSink{sink}})
	if errors.Is(err, executor.ErrNoAgentEnd) {
		return nil, &harness.Wait{C: anyOf(ctx, changed), Reason: "waiting for an agent end of the session's environment to connect"}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return t, nil, nil
}

// rpcSink answers an agent end with the protocol's errors for the
// harness's refusals.
type rpcSink struct{ harness.TurnSink }

// Append implements executor.TurnSink.
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

// RefreshModelToken implements executor.TurnSink: the model gateway is
// not built, so no model token is issued.
func (rpcSink) RefreshModelToken(context.Context) (executor.TokenGrant, error) {
	return executor.TokenGrant{}, detailed(executor.WithReason(executor.CodeResourceUnavailable, executor.ReasonModelTokenUnavailable, ""), "this server has no model gateway yet")
}

// RefreshToolsToken implements executor.TurnSink: the platform tools
// endpoint is not built, so no tools token is issued.
func (rpcSink) RefreshToolsToken(context.Context) (executor.TokenGrant, error) {
	return executor.TokenGrant{}, detailed(executor.WithReason(executor.CodeResourceUnavailable, executor.ReasonToolsTokenUnavailable, ""), "this server has no platform tools endpoint yet")
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
		go func() {
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
