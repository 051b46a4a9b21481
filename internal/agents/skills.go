package agents

import (
	"context"
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
)

// MaxSkills bounds the skills of an agent.
const MaxSkills = 20

// SkillParam is a skill of an agent as given.
type SkillParam struct {
	Type    string  `json:"type"`
	SkillID string  `json:"skill_id"`
	Version *string `json:"version"`
}

// SkillFinder finds the version of a skill an agent pins: version "" or
// "latest" is the skill's latest version now. Its errors (no such skill or
// version, a version that is not one) are returned as they are; they begin
// with field, which ends with ": ".
type SkillFinder func(ctx context.Context, field, skillID, version string) (ma.SkillVersion, error)

// ResolveSkills checks an agent's skills and pins each to a version: a
// numeric version must exist; none, "" or "latest" is the skill's latest
// version now. The skills of an agent need distinct names.
func (r Rules) ResolveSkills(ctx context.Context, field string, params []SkillParam) ([]ma.SkillRef, error) {
	if len(params) > MaxSkills {
		return nil, invalid("%s: at most %d skills, got %d", field, MaxSkills, len(params))
	}
	out := make([]ma.SkillRef, 0, len(params))
	names := map[string]int{}
	for i, p := range params {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := checkSkill(f, p); err != nil {
			return nil, err
		}
		version := ""
		if p.Version != nil {
			version = *p.Version
		}
		v, err := r.Skills(ctx, f+": ", p.SkillID, version)
		if err != nil {
			return nil, err
		}
		if j, ok := names[v.Name]; ok {
			return nil, invalid("%s: skill %s has the name %q, like %s[%d]: an agent's skills need distinct names", f, p.SkillID, v.Name, field, j)
		}
		names[v.Name] = i
		out = append(out, ma.SkillRef{Type: "custom", SkillID: v.SkillID, Version: v.ID})
	}
	return out, nil
}

// checkSkill checks what a skill param says before its skill is looked
// up: only custom skills exist here.
func checkSkill(f string, p SkillParam) error {
	switch p.Type {
	case "custom":
	case "anthropic":
		return invalid("%s: Anthropic skills (%q) are not available on this server: upload the skill's files as a custom skill (POST /v1/skills) and refer to it as {type: \"custom\", skill_id}", f, p.SkillID)
	case "":
		return invalid("%s.type: required (custom)", f)
	default:
		return invalid("%s.type: must be custom; got %q", f, p.Type)
	}
	if p.SkillID == "" {
		return invalid("%s.skill_id: required", f)
	}
	return nil
}
