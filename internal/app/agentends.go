package app

import (
	"context"
	"errors"
	"slices"

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
func (a agentEnds) StartTurn(ctx context.Context, sess *ma.Session, start executor.TurnStart, sink executor.TurnSink) (harness.AgentTurn, *harness.Wait, error) {
	machines, err := a.machinesOf(ctx, sess.EnvironmentID)
	if err != nil {
		return nil, nil, err
	}
	changed := []<-chan struct{}{a.hub.Changed(sess.EnvironmentID)}
	for _, m := range machines {
		changed = append(changed, a.hub.ChangedMachine(m))
	}
	t, err := a.hub.StartTurn(ctx, executor.AgentTurnRequest{EnvironmentID: sess.EnvironmentID, MachineIDs: machines, Start: start, Sink: sink})
	if errors.Is(err, executor.ErrNoAgentEnd) {
		return nil, &harness.Wait{C: anyOf(ctx, changed), Reason: "waiting for an agent end of the session's environment to connect"}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return t, nil, nil
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

// anyOf returns a channel closed when one of chs is closed or ctx ends.
func anyOf(ctx context.Context, chs []<-chan struct{}) <-chan struct{} {
	if len(chs) == 1 {
		return chs[0]
	}
	out := make(chan struct{})
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
			case <-out:
				return
			case <-ctx.Done():
			}
			select {
			case <-out:
			default:
				close(out)
			}
		}()
	}
	return out
}
