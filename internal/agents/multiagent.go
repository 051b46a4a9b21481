package agents

import (
	"encoding/json"
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
)

// The two forms of an agent's multiagent configuration (its "type").
const (
	// TypeCoordinator is the legacy form: a roster of agents and advisors.
	TypeCoordinator = "coordinator"
	// TypeMultiagent20261001 is the form with three members: advisor,
	// subagents and workflows.
	TypeMultiagent20261001 = "multiagent_20261001"
)

// The types of a roster entry.
const (
	// EntryAgent is a saved agent pinned to a version.
	EntryAgent = "agent"
	// EntryAdvisor is a coordinator's advisor: a model to consult.
	EntryAdvisor = "advisor"
)

// MaxRoster bounds a coordinator's roster and each list of predefined
// agents.
const MaxRoster = 20

// Multiagent is an agent's multiagent configuration, resolved: every
// reference pinned to a version, every member of multiagent_20261001 given
// (defaults applied). It is what an agent version stores and the API
// answers and, with each entry's full [RosterEntry.Definition], what a
// session's agent snapshot holds. A nil *Multiagent is a single-threaded
// agent; its methods answer accordingly.
type Multiagent struct {
	// Type is TypeCoordinator or TypeMultiagent20261001.
	Type string
	// Agents is a coordinator's roster (1 to MaxRoster entries).
	Agents []RosterEntry
	// Advisor, Subagents and Workflows are the members of
	// multiagent_20261001.
	Advisor   Advisor
	Subagents Members
	Workflows Members
}

// RosterEntry is an entry of a coordinator's roster or of a list of
// predefined agents: a saved agent pinned to a version or, in a
// coordinator's roster only, an advisor.
type RosterEntry struct {
	// Type is EntryAgent or EntryAdvisor.
	Type string
	// ID and Version pin a saved agent.
	ID      string
	Version int64
	// Model is an advisor's model.
	Model string
	// Self reports that the entry is the agent that owns the
	// configuration ({"type":"self"} as given): set by [ParseMultiagent]
	// for entries naming its owner.
	Self bool
	// Definition is the agent's full definition in a session's snapshot
	// (for Self, the session's agent with its overrides); nil in an
	// agent's configuration.
	Definition *ma.ThreadAgent
}

// Advisor is multiagent_20261001's advisor member.
type Advisor struct {
	// Enabled: the primary thread may consult Model.
	Enabled bool
	Model   string
}

// Members is multiagent_20261001's subagents or workflows member.
type Members struct {
	// Enabled: the agent may spawn session threads (subagents) or start
	// workflow runs (workflows).
	Enabled bool
	// InlineAgents: the agent (or a run's plan) may define agents that
	// are not saved.
	InlineAgents bool
	// PredefinedAgents are the saved agents it may use (at most
	// MaxRoster); never nil when Enabled.
	PredefinedAgents []RosterEntry
}

// ParseMultiagent reads a resolved configuration as an agent version or a
// session snapshot stores it; null or empty is nil (a single-threaded
// agent). owner is the id of the agent the configuration belongs to: the
// entries naming it are Self.
func ParseMultiagent(raw json.RawMessage, owner string) (*Multiagent, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var w struct {
		Type      string            `json:"type"`
		Agents    []json.RawMessage `json:"agents"`
		Advisor   *Advisor          `json:"advisor"`
		Subagents *membersWire      `json:"subagents"`
		Workflows *membersWire      `json:"workflows"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("multiagent: %w", err)
	}
	m := &Multiagent{Type: w.Type}
	switch w.Type {
	case TypeCoordinator:
		entries, err := parseEntries(w.Agents, owner)
		if err != nil {
			return nil, err
		}
		m.Agents = entries
	case TypeMultiagent20261001:
		if w.Advisor != nil {
			m.Advisor = *w.Advisor
		}
		var err error
		if m.Subagents, err = w.Subagents.members(owner); err != nil {
			return nil, err
		}
		if m.Workflows, err = w.Workflows.members(owner); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("multiagent: unknown type %q", w.Type)
	}
	return m, nil
}

// SessionMultiagent is [ParseMultiagent] of a session's agent snapshot:
// its entries carry their full definitions.
func SessionMultiagent(a ma.SessionAgent) (*Multiagent, error) {
	return ParseMultiagent(a.Multiagent, a.ID)
}

// Delegates are the saved agents the agent's primary thread may spawn as
// session threads: a coordinator's agent entries (not its advisors), or
// multiagent_20261001's subagents.predefined_agents when subagents are
// enabled. Nil for a single-threaded agent.
func (m *Multiagent) Delegates() []RosterEntry {
	if m == nil {
		return nil
	}
	if m.Type == TypeCoordinator {
		var out []RosterEntry
		for _, e := range m.Agents {
			if e.Type == EntryAgent {
				out = append(out, e)
			}
		}
		return out
	}
	if !m.Subagents.Enabled {
		return nil
	}
	return m.Subagents.PredefinedAgents
}

// SubagentsEnabled reports whether the agent may spawn session threads at
// all: a coordinator with an agent entry, or multiagent_20261001 with
// subagents enabled (predefined or inline).
func (m *Multiagent) SubagentsEnabled() bool {
	if m == nil {
		return false
	}
	if m.Type == TypeCoordinator {
		return len(m.Delegates()) > 0
	}
	return m.Subagents.Enabled
}

// InlineAgents reports whether the agent may spawn threads running agents
// it defines itself (never saved): multiagent_20261001 with subagents and
// subagents.inline_agents enabled. A coordinator may not.
func (m *Multiagent) InlineAgents() bool {
	return m != nil && m.Type == TypeMultiagent20261001 && m.Subagents.Enabled && m.Subagents.InlineAgents
}

// AdvisorModel is the model the primary thread may consult as an advisor:
// a coordinator's advisor entry, or multiagent_20261001's enabled advisor.
// ok is false when the agent has none.
func (m *Multiagent) AdvisorModel() (model string, ok bool) {
	if m == nil {
		return "", false
	}
	if m.Type == TypeCoordinator {
		for _, e := range m.Agents {
			if e.Type == EntryAdvisor {
				return e.Model, true
			}
		}
		return "", false
	}
	return m.Advisor.Model, m.Advisor.Enabled
}

// WorkflowsEnabled reports whether multiagent_20261001 enables workflow
// runs. reins stores and echoes the setting but offers no workflow tool.
func (m *Multiagent) WorkflowsEnabled() bool {
	return m != nil && m.Type == TypeMultiagent20261001 && m.Workflows.Enabled
}

// MarshalJSON writes the configuration as the API answers it.
func (m Multiagent) MarshalJSON() ([]byte, error) {
	if m.Type == TypeCoordinator {
		agents := m.Agents
		if agents == nil {
			agents = []RosterEntry{}
		}
		return json.Marshal(struct {
			Type   string        `json:"type"`
			Agents []RosterEntry `json:"agents"`
		}{m.Type, agents})
	}
	return json.Marshal(struct {
		Type      string  `json:"type"`
		Advisor   Advisor `json:"advisor"`
		Subagents Members `json:"subagents"`
		Workflows Members `json:"workflows"`
	}{m.Type, m.Advisor, m.Subagents, m.Workflows})
}

// MarshalJSON writes an agent entry as {type, id, version}, or its full
// definition when it has one, and an advisor as {type, model}.
func (e RosterEntry) MarshalJSON() ([]byte, error) {
	if e.Type == EntryAdvisor {
		return json.Marshal(struct {
			Type  string `json:"type"`
			Model string `json:"model"`
		}{e.Type, e.Model})
	}
	if e.Definition != nil {
		return json.Marshal(e.Definition)
	}
	return json.Marshal(struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}{EntryAgent, e.ID, e.Version})
}

// MarshalJSON writes {type:"enabled", model} or {type:"disabled"}.
func (a Advisor) MarshalJSON() ([]byte, error) {
	if !a.Enabled {
		return []byte(`{"type":"disabled"}`), nil
	}
	return json.Marshal(struct {
		Type  string `json:"type"`
		Model string `json:"model"`
	}{"enabled", a.Model})
}

// UnmarshalJSON reads what [Advisor.MarshalJSON] writes.
func (a *Advisor) UnmarshalJSON(b []byte) error {
	var w struct {
		Type  string `json:"type"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = Advisor{Enabled: w.Type == "enabled", Model: w.Model}
	return nil
}

// MarshalJSON writes {type:"enabled", inline_agents:{type},
// predefined_agents} or {type:"disabled"}.
func (m Members) MarshalJSON() ([]byte, error) {
	if !m.Enabled {
		return []byte(`{"type":"disabled"}`), nil
	}
	agents := m.PredefinedAgents
	if agents == nil {
		agents = []RosterEntry{}
	}
	return json.Marshal(struct {
		Type             string        `json:"type"`
		InlineAgents     toggle        `json:"inline_agents"`
		PredefinedAgents []RosterEntry `json:"predefined_agents"`
	}{"enabled", toggle{enabledType(m.InlineAgents)}, agents})
}

// toggle is {type:"enabled"} or {type:"disabled"}.
type toggle struct {
	Type string `json:"type"`
}

func enabledType(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}

// membersWire is Members as stored.
type membersWire struct {
	Type             string            `json:"type"`
	InlineAgents     toggle            `json:"inline_agents"`
	PredefinedAgents []json.RawMessage `json:"predefined_agents"`
}

func (w *membersWire) members(owner string) (Members, error) {
	if w == nil || w.Type != "enabled" {
		return Members{}, nil
	}
	entries, err := parseEntries(w.PredefinedAgents, owner)
	if err != nil {
		return Members{}, err
	}
	if entries == nil {
		entries = []RosterEntry{}
	}
	return Members{Enabled: true, InlineAgents: w.InlineAgents.Type == "enabled", PredefinedAgents: entries}, nil
}

// parseEntries reads stored roster entries: references, full definitions
// (those with a name) and advisors.
func parseEntries(raws []json.RawMessage, owner string) ([]RosterEntry, error) {
	var out []RosterEntry
	for i, raw := range raws {
		var w struct {
			Type    string          `json:"type"`
			ID      string          `json:"id"`
			Version int64           `json:"version"`
			Model   json.RawMessage `json:"model"` // an advisor's: a string
			Name    *string         `json:"name"`
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("multiagent entry %d: %w", i, err)
		}
		e := RosterEntry{Type: w.Type, ID: w.ID, Version: w.Version, Self: w.ID != "" && w.ID == owner}
		switch {
		case w.Type == EntryAdvisor:
			if err := json.Unmarshal(w.Model, &e.Model); err != nil {
				return nil, fmt.Errorf("multiagent entry %d: advisor model: %w", i, err)
			}
		case w.Name != nil:
			var def ma.ThreadAgent
			if err := json.Unmarshal(raw, &def); err != nil {
				return nil, fmt.Errorf("multiagent entry %d: %w", i, err)
			}
			e.Definition = &def
		}
		out = append(out, e)
	}
	return out, nil
}
