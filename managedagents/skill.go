package managedagents

// Skill is a skill of the Skills API (/v1/skills).
type Skill struct {
	ID   string `json:"id"`
	Type string `json:"type"` // "skill"
	// DisplayName is a single-line label, from the upload's display_name
	// or else the SKILL.md front matter's name.
	DisplayName string `json:"display_name"`
	// LatestVersionID is the id of the newest version ("" once every
	// version was deleted).
	LatestVersionID string      `json:"latest_version_id"`
	Source          SkillSource `json:"source"`
	CreatedAt       string      `json:"created_at"`
	UpdatedAt       string      `json:"updated_at"`
}

// SkillSource tells where a skill comes from: reins has "custom" skills
// only.
type SkillSource struct {
	Type string `json:"type"`
}

// SkillVersion is an immutable version of a skill.
type SkillVersion struct {
	// ID is the version: a numeric string, the creation time in
	// microseconds since the Unix epoch.
	ID      string `json:"id"`
	Type    string `json:"type"` // "skill_version"
	SkillID string `json:"skill_id"`
	// Name is the SKILL.md front matter's name: the skill's slug, the top
	// directory of its files and of its archive.
	Name string `json:"name"`
	// Description is the SKILL.md front matter's description.
	Description string `json:"description"`
	CreatedAt   string `json:"created_at"`
}

// SkillRef is a skill of an agent: {type:"custom", skill_id, version}. The
// version is resolved to a concrete version id when the agent version is
// made.
type SkillRef struct {
	Type    string `json:"type"` // "custom" ("anthropic" is refused)
	SkillID string `json:"skill_id"`
	Version string `json:"version"`
}
