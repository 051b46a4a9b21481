package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// CreateAgent implements store.Agents.
func (s *Store) CreateAgent(ctx context.Context, a ma.Agent) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agents (id, version, created_at, archived) VALUES ($1, $2, $3, $4)`,
			a.ID, a.Version, unixOf(a.CreatedAt), a.ArchivedAt != nil); err != nil {
			if isUnique(err) {
				return fmt.Errorf("agent %s: %w", a.ID, store.ErrConflict)
			}
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO agent_versions (agent_id, version, body) VALUES ($1, $2, $3)`, a.ID, a.Version, body)
		return err
	})
}

// GetAgent implements store.Agents.
func (s *Store) GetAgent(ctx context.Context, id string, version int64) (ma.Agent, error) {
	return getAgent(ctx, s.pool, id, version, "")
}

// getAgent reads a version of an agent (the latest when version is 0);
// suffix ends the query (a locking clause).
func getAgent(ctx context.Context, db querier, id string, version int64, suffix string) (ma.Agent, error) {
	var a ma.Agent
	var err error
	if version == 0 {
		err = getJSON(ctx, db, &a, `SELECT v.body FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version WHERE a.id = $1`+suffix, id)
	} else {
		err = getJSON(ctx, db, &a, `SELECT body FROM agent_versions WHERE agent_id = $1 AND version = $2`+suffix, id, version)
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
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		cur, err := getAgent(ctx, tx, id, 0, " FOR UPDATE OF a")
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
		body, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if next.Version != cur.Version {
			if _, err := tx.Exec(ctx, `INSERT INTO agent_versions (agent_id, version, body) VALUES ($1, $2, $3)`, id, next.Version, body); err != nil {
				if isUnique(err) {
					return fmt.Errorf("agent %s version %d: %w", id, next.Version, store.ErrConflict)
				}
				return err
			}
		} else if _, err := tx.Exec(ctx, `UPDATE agent_versions SET body = $1 WHERE agent_id = $2 AND version = $3`, body, id, next.Version); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE agents SET version = $1, archived = $2 WHERE id = $3`, next.Version, next.ArchivedAt != nil, id)
		return err
	})
	return out, err
}

// ListAgents implements store.Agents.
func (s *Store) ListAgents(ctx context.Context, l store.ListQuery) ([]store.Item[ma.Agent], error) {
	var q query
	if !l.IncludeArchived {
		q.and("NOT a.archived")
	}
	if l.CreatedGTE != nil {
		q.and("a.created_at >= " + q.arg(l.CreatedGTE.UnixNano()))
	}
	if l.CreatedLTE != nil {
		q.and("a.created_at <= " + q.arg(l.CreatedLTE.UnixNano()))
	}
	tail := q.page("a.pos", l)
	return listItems[ma.Agent](ctx, s.pool, `SELECT a.pos, v.body FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version`+tail, q.args, l)
}

// ListAgentVersions implements store.Agents.
func (s *Store) ListAgentVersions(ctx context.Context, id string, l store.ListQuery) ([]store.Item[ma.Agent], error) {
	if _, err := s.GetAgent(ctx, id, 0); err != nil {
		return nil, err
	}
	var q query
	q.and("agent_id = " + q.arg(id))
	tail := q.page("version", l)
	return listItems[ma.Agent](ctx, s.pool, `SELECT version, body FROM agent_versions`+tail, q.args, l)
}
