package agents

import (
	"context"
	"errors"
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
)

// Snapshot is the multiagent configuration a new session's agent snapshot
// holds: a's own (as its agent version stores it), each agent entry with
// its full definition at its pinned version. An entry of the agent itself
// at a's version is a, the session's overrides applied: they apply to the
// coordinator and its self copies only. A roster agent archived since the
// configuration was written refuses the session, as the agent itself
// would. Null stays null.
func (r Rules) Snapshot(ctx context.Context, a ma.SessionAgent) (ma.Raw, error) {
	m, err := ParseMultiagent(a.Multiagent, a.ID)
	if m == nil || err != nil {
		return a.Multiagent, err
	}
	fields := []string{"agent.multiagent.agents", "agent.multiagent.subagents.predefined_agents", "agent.multiagent.workflows.predefined_agents"}
	for k, list := range m.lists() {
		for i := range list {
			if list[i].Type != EntryAgent {
				continue
			}
			def, err := r.definition(ctx, fmt.Sprintf("%s[%d]", fields[k], i), list[i], a)
			if err != nil {
				return nil, err
			}
			list[i].Definition = &def
		}
	}
	return encode(m)
}

// definition is the full definition of the agent e pins, for a session of
// the agent a.
func (r Rules) definition(ctx context.Context, field string, e RosterEntry, a ma.SessionAgent) (ma.ThreadAgent, error) {
	if e.ID == a.ID && e.Version == a.Version {
		return a.ThreadAgent(), nil
	}
	if r.Agents == nil {
		return ma.ThreadAgent{}, errors.New("agents: Rules.Agents is required to snapshot a multiagent roster")
	}
	latest, found, err := r.Agents(ctx, e.ID, 0)
	if err != nil {
		return ma.ThreadAgent{}, err
	}
	if !found {
		return ma.ThreadAgent{}, invalid("%s: roster agent %s not found", field, e.ID)
	}
	if latest.ArchivedAt != nil {
		return ma.ThreadAgent{}, invalid("%s: roster agent %s is archived; new sessions cannot use it (update the roster)", field, e.ID)
	}
	pinned, found, err := r.Agents(ctx, e.ID, e.Version)
	if err != nil {
		return ma.ThreadAgent{}, err
	}
	if !found {
		return ma.ThreadAgent{}, invalid("%s: roster agent %s has no version %d", field, e.ID, e.Version)
	}
	return pinned.ThreadAgent(), nil
}
