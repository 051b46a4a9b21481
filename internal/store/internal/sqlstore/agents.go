package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// CreateAgent implements store.Agents.
func (s *Store) CreateAgent(ctx context.Context, a ma.Agent) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.d.WithTx(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO agents (id, version, created_at, archived, workspace_id) VALUES (?, ?, ?, ?, ?)`,
			a.ID, a.Version, unixOf(a.CreatedAt), a.ArchivedAt != nil, workspaceOf(ctx))
		if err != nil {
			return s.conflict(err, "agent "+a.ID)
		}
		if _, err = tx.Exec(ctx, `INSERT INTO agent_versions (agent_id, version, body) VALUES (?, ?, ?)`, a.ID, a.Version, body); err != nil {
			return err
		}
		if err := s.emitWebhooks(ctx, tx, workspaceOf(ctx), a.ID, "agent.created"); err != nil {
			return err
		}
		return recordOutcomeOf(ctx, tx)
	})
}

// GetAgent implements store.Agents.
func (s *Store) GetAgent(ctx context.Context, id string, version int64) (ma.Agent, error) {
	return getAgent(ctx, s.r, id, version, "")
}

// getAgent reads a version of an agent of ctx's workspace (the latest
// when version is 0); lock ends the query.
func getAgent(ctx context.Context, db Querier, id string, version int64, lock string) (ma.Agent, error) {
	var a ma.Agent
	var err error
	if version == 0 {
		cond, args := inWorkspace(ctx, "a.workspace_id")
		a, err = scanJSON[ma.Agent](db.QueryRow(ctx, `SELECT v.body FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version WHERE a.id = ?`+cond+lock, append([]any{id}, args...)...))
	} else {
		cond, args := inParentWorkspace(ctx, "agent_id", "agents")
		a, err = scanJSON[ma.Agent](db.QueryRow(ctx, `SELECT body FROM agent_versions WHERE agent_id = ? AND version = ?`+cond+lock, append([]any{id, version}, args...)...))
	}
	if err != nil {
		what := "agent"
		if version != 0 {
			what = fmt.Sprintf("agent version %d of", version)
		}
		return ma.Agent{}, notFound(err, what, id)
	}
	return a, nil
}

// UpdateAgent implements store.Agents.
func (s *Store) UpdateAgent(ctx context.Context, id string, fn func(ma.Agent) (ma.Agent, bool, error)) (ma.Agent, error) {
	var out ma.Agent
	err := s.d.WithTx(ctx, func(tx Querier) error {
		cur, err := getAgent(ctx, tx, id, 0, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		next, changed, err := fn(cur)
		if err != nil {
			return err
		}
		if !changed {
			out = cur
			return nil
		}
		out = next
		if err := s.putAgent(ctx, tx, cur, next); err != nil {
			return err
		}
		return s.emitChange(ctx, tx, "agents", "agent", id, cur.ArchivedAt, next.ArchivedAt, true)
	})
	return out, err
}

// putAgent writes next over cur: a new version, or the same version
// changed in place.
func (s *Store) putAgent(ctx context.Context, tx Querier, cur, next ma.Agent) error {
	body, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if next.Version != cur.Version {
		_, err = tx.Exec(ctx, `INSERT INTO agent_versions (agent_id, version, body) VALUES (?, ?, ?)`, cur.ID, next.Version, body)
		err = s.conflict(err, fmt.Sprintf("agent %s version %d", cur.ID, next.Version))
	} else {
		_, err = tx.Exec(ctx, `UPDATE agent_versions SET body = ? WHERE agent_id = ? AND version = ?`, body, cur.ID, next.Version)
	}
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE agents SET version = ?, archived = ? WHERE id = ?`, next.Version, next.ArchivedAt != nil, cur.ID)
	return err
}

// ListAgents implements store.Agents.
func (s *Store) ListAgents(ctx context.Context, l store.ListQuery) ([]store.Item[ma.Agent], error) {
	var q query
	q.scope(ctx, "a.workspace_id")
	if !l.IncludeArchived {
		q.and("NOT a.archived")
	}
	if l.CreatedGTE != nil {
		q.and("a.created_at >= ?", l.CreatedGTE.UnixNano())
	}
	if l.CreatedLTE != nil {
		q.and("a.created_at <= ?", l.CreatedLTE.UnixNano())
	}
	return list(ctx, s.r, scanItem[ma.Agent], `SELECT a.pos, v.body FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version`, "a.pos", &q, l)
}

// ListAgentVersions implements store.Agents.
func (s *Store) ListAgentVersions(ctx context.Context, id string, l store.ListQuery) ([]store.Item[ma.Agent], error) {
	if _, err := s.GetAgent(ctx, id, 0); err != nil {
		return nil, err
	}
	var q query
	q.and("agent_id = ?", id)
	return list(ctx, s.r, scanItem[ma.Agent], `SELECT version, body FROM agent_versions`, "version", &q, l)
}
