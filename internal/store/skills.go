package store

import (
	"context"
	"io"

	ma "github.com/reinsdev/reins/managedagents"
)

// Skills stores the skills of the Skills API and their versions. A
// version's content is a zip archive, kept like a file's content: in
// pieces of at most FileChunk bytes, with its SHA-256.
type Skills interface {
	// CreateSkill stores a new skill with its first version v and v's
	// content, read to EOF, in one transaction (v.ID must equal
	// sk.LatestVersionID).
	CreateSkill(ctx context.Context, sk Skill, v SkillVersion, content io.Reader) error
	// CreateSkillVersion adds a version to a skill and makes it the
	// latest. The version's id is v.ID, or one more than the newest
	// version's when that is not greater, so ids grow. It returns the
	// version as stored and the skill. ErrNotFound: no such skill.
	CreateSkillVersion(ctx context.Context, v SkillVersion, content io.Reader) (SkillVersion, Skill, error)
	// GetSkill returns a skill.
	GetSkill(ctx context.Context, id string) (Skill, error)
	// ListSkills lists skills.
	ListSkills(ctx context.Context, l ListQuery) ([]Item[Skill], error)
	// DeleteSkill removes a skill that has no version left; ErrConflict
	// while it has some.
	DeleteSkill(ctx context.Context, id string) error
	// GetSkillVersion returns a version of a skill.
	GetSkillVersion(ctx context.Context, skillID, version string) (SkillVersion, error)
	// ListSkillVersions lists a skill's versions; an item's Pos is the
	// numeric version.
	ListSkillVersions(ctx context.Context, skillID string, l ListQuery) ([]Item[SkillVersion], error)
	// DeleteSkillVersion removes a version and its content; the skill's
	// latest version becomes the newest one left ("" when none is).
	DeleteSkillVersion(ctx context.Context, skillID, version string) error
	// ReadSkillChunk returns piece n (from 0) of a version's content;
	// ErrNotFound past its end.
	ReadSkillChunk(ctx context.Context, skillID, version string, n int) ([]byte, error)
}

// Skill is a stored skill: its API object and its name, the slug every
// version's SKILL.md must give.
type Skill struct {
	ma.Skill
	Name string
	// WorkspaceID is the skill's workspace; the store sets it from the
	// context it is created with (WithWorkspace).
	WorkspaceID string
}

// SkillVersion is a stored skill version: its API object, and the size
// and SHA-256 (hex) of its content, checked as it is read back.
type SkillVersion struct {
	ma.SkillVersion
	SizeBytes int64
	SHA256    string
}
