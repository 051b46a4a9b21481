package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// skillKey is the key of a skill version's content in file_chunks.
func skillKey(skillID, version string) string { return skillID + "@" + version }

// versionNumber parses a version id; ErrNotFound for one that is not a
// number (no such version can exist).
func versionNumber(skillID, version string) (int64, error) {
	n, err := strconv.ParseInt(version, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("version %q of skill %s: %w", version, skillID, store.ErrNotFound)
	}
	return n, nil
}

// CreateSkill implements store.Skills.
func (s *Store) CreateSkill(ctx context.Context, sk store.Skill, v store.SkillVersion, content io.Reader) error {
	if v.ID != sk.LatestVersionID || v.SkillID != sk.ID {
		return fmt.Errorf("skill %s: the first version %s/%s is not its latest %s", sk.ID, v.SkillID, v.ID, sk.LatestVersionID)
	}
	body, err := json.Marshal(sk.Skill)
	if err != nil {
		return err
	}
	return s.d.WithTx(ctx, func(tx Querier) error {
		if _, err := tx.Exec(ctx, `INSERT INTO skills (id, name, created_at, body, workspace_id) VALUES (?, ?, ?, ?, ?)`,
			sk.ID, sk.Name, unixOf(sk.CreatedAt), body, workspaceOf(ctx)); err != nil {
			return s.conflict(err, "skill "+sk.ID)
		}
		return putSkillVersion(ctx, tx, v, content)
	})
}

// putSkillVersion stores a version and its content.
func putSkillVersion(ctx context.Context, tx Querier, v store.SkillVersion, content io.Reader) error {
	n, err := versionNumber(v.SkillID, v.ID)
	if err != nil {
		return err
	}
	body, err := json.Marshal(v.SkillVersion)
	if err != nil {
		return err
	}
	if err := putChunks(ctx, tx, skillKey(v.SkillID, v.ID), content, v.SizeBytes); err != nil {
		return fmt.Errorf("skill %s version %s: %w", v.SkillID, v.ID, err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO skill_versions (skill_id, version, size_bytes, sha256, body) VALUES (?, ?, ?, ?, ?)`,
		v.SkillID, n, v.SizeBytes, v.SHA256, body)
	return err
}

// CreateSkillVersion implements store.Skills.
func (s *Store) CreateSkillVersion(ctx context.Context, v store.SkillVersion, content io.Reader) (store.SkillVersion, store.Skill, error) {
	var sk store.Skill
	err := s.d.WithTx(ctx, func(tx Querier) error {
		var err error
		sk, err = getSkill(ctx, tx, v.SkillID, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		want, err := versionNumber(v.SkillID, v.ID)
		if err != nil {
			return err
		}
		var newest int64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM skill_versions WHERE skill_id = ?`, v.SkillID).Scan(&newest); err != nil {
			return err
		}
		v.ID = strconv.FormatInt(max(want, newest+1), 10)
		if err := putSkillVersion(ctx, tx, v, content); err != nil {
			return err
		}
		sk.LatestVersionID, sk.UpdatedAt = v.ID, v.CreatedAt
		return putSkill(ctx, tx, sk)
	})
	return v, sk, err
}

// putSkill writes a skill's API object back.
func putSkill(ctx context.Context, tx Querier, sk store.Skill) error {
	body, err := json.Marshal(sk.Skill)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE skills SET body = ? WHERE id = ?`, body, sk.ID)
	return err
}

func scanSkill(row Row) (store.Item[store.Skill], error) {
	var it store.Item[store.Skill]
	var body []byte
	if err := row.Scan(&it.Pos, &it.Value.Name, &body, &it.Value.WorkspaceID); err != nil {
		return it, err
	}
	err := json.Unmarshal(body, &it.Value.Skill)
	return it, err
}

// skillCols are the columns scanSkill reads.
const skillCols = `pos, name, body, workspace_id`

// getSkill reads a skill of ctx's workspace; lock ends the query.
func getSkill(ctx context.Context, db Querier, id, lock string) (store.Skill, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	it, err := scanSkill(db.QueryRow(ctx, `SELECT `+skillCols+` FROM skills WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return it.Value, notFound(err, "skill", id)
}

// GetSkill implements store.Skills.
func (s *Store) GetSkill(ctx context.Context, id string) (store.Skill, error) {
	return getSkill(ctx, s.r, id, "")
}

// ListSkills implements store.Skills.
func (s *Store) ListSkills(ctx context.Context, l store.ListQuery) ([]store.Item[store.Skill], error) {
	var q query
	q.scope(ctx, "workspace_id")
	q.since("created_at", nil, l.CreatedGTE, nil, l.CreatedLTE)
	return list(ctx, s.r, scanSkill, `SELECT `+skillCols+` FROM skills`, "pos", &q, l)
}

// DeleteSkill implements store.Skills.
func (s *Store) DeleteSkill(ctx context.Context, id string) error {
	return s.d.WithTx(ctx, func(tx Querier) error {
		if _, err := getSkill(ctx, tx, id, s.lock(LockUpdate)); err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM skill_versions WHERE skill_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("skill %s has %d versions: %w", id, n, store.ErrConflict)
		}
		_, err := tx.Exec(ctx, `DELETE FROM skills WHERE id = ?`, id)
		return err
	})
}

func scanSkillVersion(row Row) (store.Item[store.SkillVersion], error) {
	var it store.Item[store.SkillVersion]
	var body []byte
	if err := row.Scan(&it.Pos, &it.Value.SizeBytes, &it.Value.SHA256, &body); err != nil {
		return it, err
	}
	err := json.Unmarshal(body, &it.Value.SkillVersion)
	return it, err
}

const skillVersionColumns = `SELECT version, size_bytes, sha256, body FROM skill_versions`

// GetSkillVersion implements store.Skills.
func (s *Store) GetSkillVersion(ctx context.Context, skillID, version string) (store.SkillVersion, error) {
	n, err := versionNumber(skillID, version)
	if err != nil {
		return store.SkillVersion{}, err
	}
	cond, args := inParentWorkspace(ctx, "skill_id", "skills")
	it, err := scanSkillVersion(s.r.QueryRow(ctx, skillVersionColumns+` WHERE skill_id = ? AND version = ?`+cond, append([]any{skillID, n}, args...)...))
	return it.Value, notFound(err, "version "+version+" of skill", skillID)
}

// ListSkillVersions implements store.Skills.
func (s *Store) ListSkillVersions(ctx context.Context, skillID string, l store.ListQuery) ([]store.Item[store.SkillVersion], error) {
	var q query
	q.and("skill_id = ?", skillID)
	q.scopeParent(ctx, "skill_id", "skills")
	return list(ctx, s.r, scanSkillVersion, skillVersionColumns, "version", &q, l)
}

// DeleteSkillVersion implements store.Skills.
func (s *Store) DeleteSkillVersion(ctx context.Context, skillID, version string) error {
	n, err := versionNumber(skillID, version)
	if err != nil {
		return err
	}
	return s.d.WithTx(ctx, func(tx Querier) error {
		sk, err := getSkill(ctx, tx, skillID, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		k, err := tx.Exec(ctx, `DELETE FROM skill_versions WHERE skill_id = ? AND version = ?`, skillID, n)
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("version %s of skill %s: %w", version, skillID, store.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM file_chunks WHERE file_id = ?`, skillKey(skillID, version)); err != nil {
			return err
		}
		var newest int64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM skill_versions WHERE skill_id = ?`, skillID).Scan(&newest); err != nil {
			return err
		}
		sk.LatestVersionID = ""
		if newest > 0 {
			sk.LatestVersionID = strconv.FormatInt(newest, 10)
		}
		sk.UpdatedAt = ma.Time(time.Now())
		return putSkill(ctx, tx, sk)
	})
}

// ReadSkillChunk implements store.Skills.
func (s *Store) ReadSkillChunk(ctx context.Context, skillID, version string, n int) ([]byte, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	if cond != "" {
		cond, args = " AND EXISTS (SELECT 1 FROM skills WHERE id = ?"+cond+")", append([]any{skillID}, args...)
	}
	data, err := s.readChunk(ctx, skillKey(skillID, version), n, cond, args)
	return data, notFound(err, fmt.Sprintf("piece %d of skill", n), skillKey(skillID, version))
}
