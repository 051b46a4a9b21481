package agents

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	ma "github.com/reinsdev/reins/managedagents"
)

// Rules holds what checking an agent's configuration asks of the rest of
// the server.
type Rules struct {
	// Model, if set, refuses a model id that no configured provider
	// serves; field names the model in its error, which is returned as it
	// is.
	Model func(field, id string) error
	// Skills finds the skill versions agents pin; required to resolve
	// skills.
	Skills SkillFinder
	// Agents finds the agents a multiagent roster references; required
	// to resolve a multiagent configuration.
	Agents AgentFinder
}

// AgentFinder reads a version of an agent of the caller's workspace (the
// latest for version 0); found is false when there is none. Its errors
// are returned as they are.
type AgentFinder func(ctx context.Context, id string, version int64) (a ma.Agent, found bool, err error)

// checkModel asks Rules.Model, if set, whether a provider serves id.
func (r Rules) checkModel(field, id string) error {
	if r.Model == nil {
		return nil
	}
	return r.Model(field, id)
}

// MetadataFunc gives an agent's metadata from its current one (nil for a
// new agent), checked: the metadata rules are the API's, common to every
// resource, and stay with the caller. Its errors are returned as they are.
type MetadataFunc func(cur ma.Metadata) (ma.Metadata, error)

// Create is a new agent as given.
type Create struct {
	Name        *string
	Description string
	System      string
	Model       ma.ModelConfig
	Tools       []ToolParam
	MCPServers  []ma.MCPServer
	Skills      []SkillParam
	// Multiagent, if set and not null, is the agent's multiagent
	// configuration as given ([Multiagent]).
	Multiagent json.RawMessage
	// ExecutionIdentity is accepted when absent or null only: this server
	// does not implement it yet.
	ExecutionIdentity json.RawMessage
	// Metadata, if set, gives the agent's metadata; unset, it has none.
	Metadata MetadataFunc
}

// New checks c and returns version 1 of the agent it describes, created
// at now, with a new id. Its tools are resolved ([ResolveTools]) and its
// skills pinned ([Rules.ResolveSkills]).
func (r Rules) New(ctx context.Context, c Create, now time.Time) (ma.Agent, error) {
	if c.Name == nil {
		return ma.Agent{}, invalid("name: required")
	}
	if err := checkLen("name", *c.Name, 1, 256); err != nil {
		return ma.Agent{}, err
	}
	if err := CheckModel(c.Model); err != nil {
		return ma.Agent{}, err
	}
	if err := checkText(c.Description, c.System); err != nil {
		return ma.Agent{}, err
	}
	if err := unsupported(map[string]json.RawMessage{"execution_identity": c.ExecutionIdentity}); err != nil {
		return ma.Agent{}, err
	}
	if err := r.checkModel("model", c.Model.ID); err != nil {
		return ma.Agent{}, err
	}
	meta := ma.Metadata{}
	if c.Metadata != nil {
		m, err := c.Metadata(nil)
		if err != nil {
			return ma.Agent{}, err
		}
		if m != nil {
			meta = m
		}
	}
	servers := c.MCPServers
	if servers == nil {
		servers = []ma.MCPServer{}
	}
	tools, err := ResolveTools(c.Tools, servers)
	if err != nil {
		return ma.Agent{}, err
	}
	if err := CheckWebTools(c.Model.ID, tools); err != nil {
		return ma.Agent{}, err
	}
	skills, err := r.ResolveSkills(ctx, "skills", c.Skills)
	if err != nil {
		return ma.Agent{}, err
	}
	id := ids.New(ids.Agent)
	multi, err := r.newMultiagent(ctx, c.Multiagent, id)
	if err != nil {
		return ma.Agent{}, err
	}
	at := ma.Time(now)
	return ma.Agent{ID: id, Type: "agent", Name: *c.Name, Description: c.Description, System: c.System,
		Model: c.Model, Tools: tools, MCPServers: servers, Skills: skills, Multiagent: multi,
		ExecutionIdentity: ma.Raw("null"), Metadata: meta, Version: 1, CreatedAt: at, UpdatedAt: at}, nil
}

// newMultiagent is the multiagent configuration of version 1 of the new
// agent id, as given: null when none.
func (r Rules) newMultiagent(ctx context.Context, raw json.RawMessage, id string) (ma.Raw, error) {
	if isNull(raw) {
		return ma.Raw("null"), nil
	}
	p, err := r.multiagentOf(ctx, raw, id)
	if err != nil {
		return nil, err
	}
	m := p.build(nil)
	if err := m.validate(); err != nil {
		return nil, err
	}
	m.pinSelf(0, 1)
	return encode(m)
}

// checkText checks an agent's description and system prompt.
func checkText(description, system string) error {
	if err := checkLen("description", description, 0, 2048); err != nil {
		return err
	}
	return checkLen("system", system, 0, 100000)
}

// unsupported refuses the fields this server does not implement yet when
// they carry a value (null means "none"), in the order of their names.
func unsupported(fields map[string]json.RawMessage) error {
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if v := fields[name]; len(v) > 0 && string(v) != "null" {
			return invalid("%s: not supported by this server yet", name)
		}
	}
	return nil
}

// Opt is a field of an [Update]: Set when given, Null when given as null.
type Opt[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// Update is a change to an agent as given: what it leaves unset keeps its
// value.
type Update struct {
	// Version, if set, must be the agent's latest version.
	Version *int64
	// Name, Description and System, if set, replace the agent's. A name
	// cannot be cleared; a null description or system clears it.
	Name, Description, System Opt[string]
	// Model, if set, replaces the agent's.
	Model *ma.ModelConfig
	// Tools and MCPServers, if set, replace the agent's; set to nil, they
	// clear them. New MCP servers alone check the agent's tools again.
	Tools      *[]ToolParam
	MCPServers *[]ma.MCPServer
	// Skills, if set, replace the agent's, pinned again.
	Skills *[]SkillParam
	// ID is the agent's id: a multiagent roster entry naming it is the
	// agent itself (self).
	ID string
	// Multiagent, if set, is the agent's multiagent configuration as
	// given: null clears it; a coordinator replaces it; a
	// multiagent_20261001 merges into a stored one level by level.
	Multiagent json.RawMessage
	// ExecutionIdentity is accepted when absent or null only: this server
	// does not implement it yet.
	ExecutionIdentity json.RawMessage
	// Metadata, if set, gives the agent's metadata from its current one.
	Metadata MetadataFunc
}

// Change is an [Update] checked against the server, with its skills
// pinned: what [Change.Apply] merges into the agent's latest version.
type Change struct {
	u      Update
	skills []ma.SkillRef    // nil: unchanged
	multi  *multiagentParam // nil: unchanged or cleared (u.Multiagent null)
}

// Prepare checks what of u does not depend on the agent (the fields not
// implemented, whether a provider serves the model) and pins its skills.
// Call it before the store's transaction, which runs [Change.Apply]: it
// may read the store.
func (r Rules) Prepare(ctx context.Context, u Update) (Change, error) {
	if err := unsupported(map[string]json.RawMessage{"execution_identity": u.ExecutionIdentity}); err != nil {
		return Change{}, err
	}
	if u.Model != nil {
		if err := r.checkModel("model", u.Model.ID); err != nil {
			return Change{}, err
		}
	}
	c := Change{u: u}
	if !isNull(u.Multiagent) {
		var err error
		if c.multi, err = r.multiagentOf(ctx, u.Multiagent, u.ID); err != nil {
			return Change{}, err
		}
	}
	if u.Skills != nil {
		var err error
		if c.skills, err = r.ResolveSkills(ctx, "skills", *u.Skills); err != nil {
			return Change{}, err
		}
	}
	return c, nil
}

// Apply merges c into cur, the agent's latest version, and returns its next
// version, updated at now, and whether it differs from cur: a change that
// changes nothing makes no version. An archived agent is read-only.
func (c Change) Apply(cur ma.Agent, now time.Time) (next ma.Agent, changed bool, err error) {
	u := c.u
	if cur.ArchivedAt != nil {
		return cur, false, conflict("agent %s is archived and read-only", cur.ID)
	}
	if u.Version != nil && *u.Version != cur.Version {
		return cur, false, conflict("version: the agent is at version %d, not %d", cur.Version, *u.Version)
	}
	next = cur
	next.Tools = slices.Clone(cur.Tools)
	if err := u.applyText(&next); err != nil {
		return cur, false, err
	}
	if u.Model != nil {
		if err := CheckModel(*u.Model); err != nil {
			return cur, false, err
		}
		next.Model = *u.Model
	}
	if c.skills != nil {
		next.Skills = c.skills
	}
	if err := u.applyTools(cur, &next); err != nil {
		return cur, false, err
	}
	if u.Metadata != nil {
		if next.Metadata, err = u.Metadata(cur.Metadata); err != nil {
			return cur, false, err
		}
	}
	if err := CheckWebTools(next.Model.ID, next.Tools); err != nil {
		return cur, false, err
	}
	if next.Multiagent, err = c.applyMultiagent(cur); err != nil {
		return cur, false, err
	}
	if equal(cur, next) {
		return cur, false, nil
	}
	next.Version = cur.Version + 1
	next.UpdatedAt = ma.Time(now)
	if next.Multiagent, err = repinSelf(next.Multiagent, cur.ID, cur.Version, next.Version); err != nil {
		return cur, false, err
	}
	return next, true, nil
}

// applyMultiagent is the multiagent configuration c gives cur, validated,
// its entries of the agent itself pinned to cur's version (moved to the
// next by [repinSelf] when the change makes one).
func (c Change) applyMultiagent(cur ma.Agent) (ma.Raw, error) {
	switch {
	case len(c.u.Multiagent) == 0:
		return cur.Multiagent, nil
	case c.multi == nil:
		return ma.Raw("null"), nil
	}
	stored, err := ParseMultiagent(cur.Multiagent, cur.ID)
	if err != nil {
		return nil, err
	}
	m := c.multi.build(stored)
	if err := m.validate(); err != nil {
		return nil, err
	}
	m.pinSelf(0, cur.Version)
	return encode(m)
}

// repinSelf moves the entries of the agent owner in raw pinned to version
// from to version to: the agent itself, as each of its versions holds it.
func repinSelf(raw ma.Raw, owner string, from, to int64) (ma.Raw, error) {
	m, err := ParseMultiagent(raw, owner)
	if m == nil || err != nil {
		return raw, err
	}
	m.pinSelf(from, to)
	return encode(m)
}

// applyText sets the name, description and system prompt u gives.
func (u Update) applyText(next *ma.Agent) error {
	if u.Name.Set {
		if u.Name.Null {
			return invalid("name: cannot be cleared")
		}
		if err := checkLen("name", u.Name.Value, 1, 256); err != nil {
			return err
		}
		next.Name = u.Name.Value
	}
	if u.Description.Set {
		if err := checkLen("description", u.Description.Value, 0, 2048); err != nil {
			return err
		}
		next.Description = u.Description.Value
	}
	if u.System.Set {
		if err := checkLen("system", u.System.Value, 0, 100000); err != nil {
			return err
		}
		next.System = u.System.Value
	}
	return nil
}

// applyTools sets the tools and MCP servers u gives, resolved: the tools
// given, or cur's again when only the servers change.
func (u Update) applyTools(cur ma.Agent, next *ma.Agent) error {
	servers := cur.MCPServers
	if u.MCPServers != nil {
		servers = *u.MCPServers
		if servers == nil {
			servers = []ma.MCPServer{}
		}
	}
	if u.Tools == nil && reflect.DeepEqual(servers, cur.MCPServers) {
		return nil
	}
	params := ToolParams(cur.Tools)
	if u.Tools != nil {
		params = *u.Tools
	}
	tools, err := ResolveTools(params, servers)
	if err != nil {
		return err
	}
	next.Tools, next.MCPServers = tools, servers
	return nil
}

// equal reports whether two versions of an agent say the same.
func equal(a, b ma.Agent) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
