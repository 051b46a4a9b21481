package agents

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// multiagentParam is a multiagent configuration as given: a coordinator's
// roster, or the members of multiagent_20261001 the request sent.
type multiagentParam struct {
	typ    string
	agents []entryParam // coordinator
	// advisor, subagents and workflows are multiagent_20261001's members;
	// nil when omitted.
	advisor              *advisorParam
	subagents, workflows *membersParam
}

// entryParam is a roster entry as given.
type entryParam struct {
	field   string // where it was given, for errors
	kind    string // EntryAgent, "self" or EntryAdvisor
	id      string
	version int64 // 0: the latest
	model   string
	ref     RosterEntry // resolved by [Rules.resolve]
}

// advisorParam is multiagent_20261001's advisor as given; null takes the
// default, disabled.
type advisorParam struct {
	enabled bool
	model   string
}

// membersParam is subagents or workflows as given. null takes the default
// (enabled, inline agents enabled, no predefined agents).
type membersParam struct {
	null    bool
	enabled bool
	// inline is inline_agents, when given (null: enabled).
	inline *bool
	// predefined is predefined_agents, when given (null: empty).
	predefined *[]entryParam
}

// parseMultiagentParam reads a multiagent configuration as given (not
// null), checking its shape: the rules that need no other agent.
func parseMultiagentParam(raw json.RawMessage) (*multiagentParam, error) {
	const field = "multiagent"
	obj, typ, err := typedObject(field, raw)
	if err != nil {
		return nil, err
	}
	p := &multiagentParam{typ: typ}
	switch typ {
	case TypeCoordinator:
		if err := onlyKeys(field, obj, "type", "agents"); err != nil {
			return nil, err
		}
		p.agents, err = parseRoster(field+".agents", obj["agents"], true)
		return p, err
	case TypeMultiagent20261001:
		if err := onlyKeys(field, obj, "type", "advisor", "subagents", "workflows"); err != nil {
			return nil, err
		}
		if v, ok := obj["advisor"]; ok {
			if p.advisor, err = parseAdvisor(field+".advisor", v); err != nil {
				return nil, err
			}
		}
		if v, ok := obj["subagents"]; ok {
			if p.subagents, err = parseMembers(field+".subagents", v); err != nil {
				return nil, err
			}
		}
		if v, ok := obj["workflows"]; ok {
			if p.workflows, err = parseMembers(field+".workflows", v); err != nil {
				return nil, err
			}
		}
		return p, nil
	default:
		return nil, invalid("%s.type: must be %s or %s; got %q", field, TypeCoordinator, TypeMultiagent20261001, typ)
	}
}

// parseRoster reads a coordinator's roster (coordinator true: 1 to
// MaxRoster entries, advisors allowed, agents required) or a list of
// predefined agents (at most MaxRoster, no advisors; null is empty). At
// most one entry may be self, and at most one an advisor.
func parseRoster(field string, raw json.RawMessage, coordinator bool) ([]entryParam, error) {
	if isNull(raw) && !coordinator {
		return []entryParam{}, nil
	}
	var raws []json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &raws) != nil {
		return nil, invalid("%s: required, a list of roster entries", field)
	}
	if coordinator && (len(raws) < 1 || len(raws) > MaxRoster) {
		return nil, invalid("%s: a coordinator's roster holds 1 to %d entries; got %d", field, MaxRoster, len(raws))
	}
	if len(raws) > MaxRoster {
		return nil, invalid("%s: at most %d predefined agents; got %d", field, MaxRoster, len(raws))
	}
	out := make([]entryParam, 0, len(raws))
	var self, advisor string
	for i, r := range raws {
		e, err := parseEntry(fmt.Sprintf("%s[%d]", field, i), r, coordinator)
		if err != nil {
			return nil, err
		}
		switch {
		case e.kind == "self" && self != "":
			return nil, invalid("%s: at most one self entry; %s is one already", e.field, self)
		case e.kind == "self":
			self = e.field
		case e.kind == EntryAdvisor && advisor != "":
			return nil, invalid("%s: at most one advisor entry; %s is one already", e.field, advisor)
		case e.kind == EntryAdvisor:
			advisor = e.field
		}
		out = append(out, e)
	}
	return out, nil
}

// parseEntry reads a roster entry: an agent id, {type:"agent", id,
// version?}, {type:"self"} or, when advisors are allowed,
// {type:"advisor", model}.
func parseEntry(field string, raw json.RawMessage, advisors bool) (entryParam, error) {
	e := entryParam{field: field, kind: EntryAgent}
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &e.id); err != nil || e.id == "" {
			return e, invalid("%s: an agent id must not be empty", field)
		}
		return e, nil
	}
	obj, typ, err := typedObject(field, raw)
	if err != nil {
		return e, err
	}
	e.kind = typ
	switch {
	case typ == EntryAgent:
		return e, parseAgentRef(field, obj, &e)
	case typ == "self":
		return e, onlyKeys(field, obj, "type")
	case typ == EntryAdvisor && advisors:
		if err := onlyKeys(field, obj, "type", "model"); err != nil {
			return e, err
		}
		e.model, err = requiredString(field+".model", obj["model"])
		return e, err
	}
	kinds := "an agent id, agent or self"
	if advisors {
		kinds = "an agent id, agent, self or advisor"
	}
	return e, invalid("%s.type: must be %s; got %q", field, kinds, typ)
}

// parseAgentRef reads {type:"agent", id, version?} into e.
func parseAgentRef(field string, obj map[string]json.RawMessage, e *entryParam) error {
	if err := onlyKeys(field, obj, "type", "id", "version"); err != nil {
		return err
	}
	id, err := requiredString(field+".id", obj["id"])
	if err != nil {
		return err
	}
	e.id = id
	if v, ok := obj["version"]; ok && !isNull(v) {
		if json.Unmarshal(v, &e.version) != nil || e.version < 1 {
			return invalid("%s.version: must be a version number (1 or more)", field)
		}
	}
	return nil
}

// parseAdvisor reads multiagent_20261001's advisor: null (the default,
// disabled), {type:"enabled", model} or {type:"disabled"}.
func parseAdvisor(field string, raw json.RawMessage) (*advisorParam, error) {
	if isNull(raw) {
		return &advisorParam{}, nil
	}
	obj, typ, err := typedObject(field, raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "disabled":
		return &advisorParam{}, onlyKeys(field, obj, "type")
	case "enabled":
		if err := onlyKeys(field, obj, "type", "model"); err != nil {
			return nil, err
		}
		model, err := requiredString(field+".model", obj["model"])
		if err != nil {
			return nil, invalid("%s.model: required: an enabled advisor needs its model", field)
		}
		return &advisorParam{enabled: true, model: model}, nil
	}
	return nil, invalid("%s.type: must be enabled or disabled; got %q", field, typ)
}

// parseMembers reads multiagent_20261001's subagents or workflows: null
// (the default, enabled), {type:"disabled"} or {type:"enabled",
// inline_agents?, predefined_agents?}.
func parseMembers(field string, raw json.RawMessage) (*membersParam, error) {
	if isNull(raw) {
		return &membersParam{null: true}, nil
	}
	obj, typ, err := typedObject(field, raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "disabled":
		return &membersParam{}, onlyKeys(field, obj, "type")
	case "enabled":
	default:
		return nil, invalid("%s.type: must be enabled or disabled; got %q", field, typ)
	}
	if err := onlyKeys(field, obj, "type", "inline_agents", "predefined_agents"); err != nil {
		return nil, err
	}
	p := &membersParam{enabled: true}
	if v, ok := obj["inline_agents"]; ok {
		on, err := parseToggle(field+".inline_agents", v)
		if err != nil {
			return nil, err
		}
		p.inline = &on
	}
	if v, ok := obj["predefined_agents"]; ok {
		list, err := parseRoster(field+".predefined_agents", v, false)
		if err != nil {
			return nil, err
		}
		p.predefined = &list
	}
	return p, nil
}

// parseToggle reads {type:"enabled"} or {type:"disabled"}; null is the
// default, enabled.
func parseToggle(field string, raw json.RawMessage) (bool, error) {
	if isNull(raw) {
		return true, nil
	}
	obj, typ, err := typedObject(field, raw)
	if err != nil {
		return false, err
	}
	if typ != "enabled" && typ != "disabled" {
		return false, invalid("%s.type: must be enabled or disabled; got %q", field, typ)
	}
	return typ == "enabled", onlyKeys(field, obj, "type")
}

// typedObject reads a JSON object and its type, which every object sent
// needs.
func typedObject(field string, raw json.RawMessage) (map[string]json.RawMessage, string, error) {
	var obj map[string]json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &obj) != nil {
		return nil, "", invalid("%s: must be an object", field)
	}
	v, ok := obj["type"]
	var typ string
	if !ok || isNull(v) || json.Unmarshal(v, &typ) != nil || typ == "" {
		return nil, "", invalid("%s.type: required (every object sent needs its type)", field)
	}
	return obj, typ, nil
}

// onlyKeys refuses a key of obj not in keys.
func onlyKeys(field string, obj map[string]json.RawMessage, keys ...string) error {
	var unknown []string
	for k := range obj {
		if !slices.Contains(keys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return invalid("%s.%s: unknown field (allowed: %s)", field, unknown[0], strings.Join(keys, ", "))
	}
	return nil
}

// requiredString reads a non-empty string.
func requiredString(field string, raw json.RawMessage) (string, error) {
	var s string
	if isNull(raw) || json.Unmarshal(raw, &s) != nil || s == "" {
		return "", invalid("%s: required, a non-empty string", field)
	}
	return s, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }
