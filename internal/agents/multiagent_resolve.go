package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
)

// resolve checks the agents p references against the store and pins each:
// an entry naming owner (or self) is the agent itself; any other must
// exist in the caller's workspace, not be archived and have no multiagent
// of its own (depth limit 1). An advisor's model must be one a provider
// serves. The entries of a list must name distinct agents.
func (r Rules) resolve(ctx context.Context, p *multiagentParam, owner string) error {
	lists := [][]entryParam{p.agents}
	for _, m := range []*membersParam{p.subagents, p.workflows} {
		if m != nil && m.predefined != nil {
			lists = append(lists, *m.predefined)
		}
	}
	for _, list := range lists {
		if err := distinctParams(list, owner); err != nil {
			return err
		}
		for i := range list {
			ref, err := r.resolveEntry(ctx, list[i], owner)
			if err != nil {
				return err
			}
			list[i].ref = ref
		}
	}
	if p.advisor != nil && p.advisor.enabled {
		return r.checkAdvisor("multiagent.advisor.model", p.advisor.model)
	}
	return nil
}

// distinctParams refuses two entries naming the same agent, self counting
// as owner.
func distinctParams(list []entryParam, owner string) error {
	seen := map[string]string{}
	for _, e := range list {
		id := e.id
		switch e.kind {
		case EntryAdvisor:
			continue
		case "self":
			id = owner
		}
		if first, ok := seen[id]; ok {
			return invalid("%s: entries must reference distinct agents (after resolving self and agent ids); %s names %s too", e.field, first, id)
		}
		seen[id] = e.field
	}
	return nil
}

// resolveEntry pins an entry as given (see [Rules.resolve]). An entry of
// the agent itself is Self, pinned later to the version being written
// unless it names another.
func (r Rules) resolveEntry(ctx context.Context, e entryParam, owner string) (RosterEntry, error) {
	switch {
	case e.kind == EntryAdvisor:
		return RosterEntry{Type: EntryAdvisor, Model: e.model}, r.checkAdvisor(e.field+".model", e.model)
	case e.kind == "self" || e.id == owner:
		return RosterEntry{Type: EntryAgent, ID: owner, Version: e.version, Self: true}, nil
	}
	if r.Agents == nil {
		return RosterEntry{}, errors.New("agents: Rules.Agents is required to resolve a multiagent roster")
	}
	latest, found, err := r.Agents(ctx, e.id, 0)
	if err != nil {
		return RosterEntry{}, err
	}
	if !found {
		return RosterEntry{}, invalid("%s: agent %s not found; roster agents must exist in this agent's workspace", e.field, e.id)
	}
	if latest.ArchivedAt != nil {
		return RosterEntry{}, invalid("%s: agent %s is archived; roster agents must not be archived", e.field, e.id)
	}
	pinned := latest
	if e.version != 0 && e.version != latest.Version {
		if pinned, found, err = r.Agents(ctx, e.id, e.version); err != nil {
			return RosterEntry{}, err
		} else if !found {
			return RosterEntry{}, invalid("%s.version: agent %s has no version %d", e.field, e.id, e.version)
		}
	}
	if !isNull(pinned.Multiagent) {
		return RosterEntry{}, invalid("%s: agent %s version %d has multiagent set; roster agents must not (depth limit 1)", e.field, e.id, pinned.Version)
	}
	return RosterEntry{Type: EntryAgent, ID: e.id, Version: pinned.Version}, nil
}

// checkAdvisor checks an advisor's model: reins permits as an advisor any
// model a configured provider serves, whatever the agent's model.
func (r Rules) checkAdvisor(field, model string) error {
	if len(model) > 256 {
		return invalid("%s: id longer than 256 characters", field)
	}
	return r.checkModel(field, model)
}

// refs are the resolved entries of list.
func refs(list []entryParam) []RosterEntry {
	out := make([]RosterEntry, len(list))
	for i, e := range list {
		out[i] = e.ref
	}
	return out
}

// defaultMembers is subagents or workflows by default: enabled, inline
// agents enabled, no predefined agents.
func defaultMembers() Members {
	return Members{Enabled: true, InlineAgents: true, PredefinedAgents: []RosterEntry{}}
}

// build is the configuration p gives over stored, the agent's current one
// (nil if none): a coordinator replaces it; multiagent_20261001 merges
// into a stored multiagent_20261001 level by level, and into the defaults
// otherwise.
func (p *multiagentParam) build(stored *Multiagent) *Multiagent {
	if p.typ == TypeCoordinator {
		return &Multiagent{Type: TypeCoordinator, Agents: refs(p.agents)}
	}
	m := &Multiagent{Type: TypeMultiagent20261001, Subagents: defaultMembers(), Workflows: defaultMembers()}
	if stored != nil && stored.Type == TypeMultiagent20261001 {
		*m = *stored
	}
	if p.advisor != nil {
		m.Advisor = Advisor{Enabled: p.advisor.enabled, Model: p.advisor.model}
	}
	m.Subagents = p.subagents.apply(m.Subagents)
	m.Workflows = p.workflows.apply(m.Workflows)
	return m
}

// apply merges p into cur: omitted, cur stays; null takes the default; a
// type other than cur's replaces it (what p omits takes its default); the
// same type keeps what p omits.
func (p *membersParam) apply(cur Members) Members {
	switch {
	case p == nil:
		return cur
	case p.null:
		return defaultMembers()
	case !p.enabled:
		return Members{}
	}
	next := cur
	if !cur.Enabled {
		next = defaultMembers()
	}
	if p.inline != nil {
		next.InlineAgents = *p.inline
	}
	if p.predefined != nil {
		next.PredefinedAgents = refs(*p.predefined)
	}
	return next
}

// validate checks the rules a configuration, merged, must keep: a
// coordinator's roster of 1 to MaxRoster distinct entries; for
// multiagent_20261001, at most MaxRoster distinct predefined agents in each
// member, and at least one when its inline agents are disabled.
func (m *Multiagent) validate() error {
	if m.Type == TypeCoordinator {
		if n := len(m.Agents); n < 1 || n > MaxRoster {
			return invalid("multiagent.agents: a coordinator's roster holds 1 to %d entries; got %d", MaxRoster, n)
		}
		return distinct("multiagent.agents", m.Agents)
	}
	for _, mem := range []struct {
		field string
		m     Members
	}{{"multiagent.subagents", m.Subagents}, {"multiagent.workflows", m.Workflows}} {
		if !mem.m.Enabled {
			continue
		}
		if n := len(mem.m.PredefinedAgents); n > MaxRoster {
			return invalid("%s.predefined_agents: at most %d predefined agents; got %d", mem.field, MaxRoster, n)
		}
		if !mem.m.InlineAgents && len(mem.m.PredefinedAgents) == 0 {
			return invalid("%s: inline_agents is disabled, so predefined_agents must name at least one agent", mem.field)
		}
		if err := distinct(mem.field+".predefined_agents", mem.m.PredefinedAgents); err != nil {
			return err
		}
	}
	return nil
}

// distinct refuses two agent entries of list naming the same agent.
func distinct(field string, list []RosterEntry) error {
	seen := map[string]int{}
	for i, e := range list {
		if e.Type != EntryAgent {
			continue
		}
		if j, ok := seen[e.ID]; ok {
			return invalid("%s[%d]: entries must reference distinct agents; [%d] names %s too", field, i, j, e.ID)
		}
		seen[e.ID] = i
	}
	return nil
}

// lists are the entry lists of m.
func (m *Multiagent) lists() [][]RosterEntry {
	return [][]RosterEntry{m.Agents, m.Subagents.PredefinedAgents, m.Workflows.PredefinedAgents}
}

// pinSelf pins the entries of the agent itself that name no version yet,
// and those pinned to version from, to version to.
func (m *Multiagent) pinSelf(from, to int64) {
	for _, list := range m.lists() {
		for i := range list {
			if list[i].Self && (list[i].Version == 0 || list[i].Version == from) {
				list[i].Version = to
			}
		}
	}
}

// multiagentOf reads a configuration as given (not null) for the agent
// owner and resolves its references ([Rules.resolve]).
func (r Rules) multiagentOf(ctx context.Context, raw json.RawMessage, owner string) (*multiagentParam, error) {
	p, err := parseMultiagentParam(raw)
	if err != nil {
		return nil, err
	}
	if owner == "" {
		return nil, errors.New("agents: the agent's id is required to resolve its multiagent configuration (Update.ID)")
	}
	if err := r.resolve(ctx, p, owner); err != nil {
		return nil, err
	}
	return p, nil
}

// encode is m as an agent stores it, null for nil.
func encode(m *Multiagent) (ma.Raw, error) {
	if m == nil {
		return ma.Raw("null"), nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("multiagent: %w", err)
	}
	return b, nil
}
