package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

func unixOf(rfc string) int64 {
	t, err := time.Parse(time.RFC3339Nano, rfc)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}

// CreateAgent implements store.Agents.
func (s *Store) CreateAgent(ctx context.Context, a ma.Agent) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO agents (id, version, created_at) VALUES (?, ?, ?)`, a.ID, a.Version, unixOf(a.CreatedAt)); err != nil {
			if isUnique(err) {
				return fmt.Errorf("agent %s: %w", a.ID, store.ErrConflict)
			}
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO agent_versions (agent_id, version, body) VALUES (?, ?, ?)`, a.ID, a.Version, body)
		return err
	})
}

func decodeAgent(body []byte) (ma.Agent, error) {
	var a ma.Agent
	err := json.Unmarshal(body, &a)
	return a, err
}

// GetAgent implements store.Agents.
func (s *Store) GetAgent(ctx context.Context, id string, version int64) (ma.Agent, error) {
	return s.getAgent(ctx, s.r, id, version)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) getAgent(ctx context.Context, q querier, id string, version int64) (ma.Agent, error) {
	var body []byte
	var err error
	if version == 0 {
		err = q.QueryRowContext(ctx, `SELECT v.body FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version WHERE a.id = ?`, id).Scan(&body)
	} else {
		err = q.QueryRowContext(ctx, `SELECT body FROM agent_versions WHERE agent_id = ? AND version = ?`, id, version).Scan(&body)
	}
	if err != nil {
		what := "agent"
		if version != 0 {
			what = fmt.Sprintf("agent version %d of", version)
		}
		return ma.Agent{}, notFound(err, what, id)
	}
	return decodeAgent(body)
}

// UpdateAgent implements store.Agents.
func (s *Store) UpdateAgent(ctx context.Context, id string, fn func(ma.Agent) (ma.Agent, bool, error)) (ma.Agent, error) {
	var out ma.Agent
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		cur, err := s.getAgent(ctx, tx, id, 0)
		if err != nil {
			return err
		}
		next, changed, err := fn(cur)
		if err != nil {
			return err
		}
		out = next
		if !changed {
			out = cur
			return nil
		}
		body, err := json.Marshal(next)
		if err != nil {
			return err
		}
		archived := 0
		if next.ArchivedAt != nil {
			archived = 1
		}
		if next.Version != cur.Version {
			if _, err := tx.ExecContext(ctx, `INSERT INTO agent_versions (agent_id, version, body) VALUES (?, ?, ?)`, id, next.Version, body); err != nil {
				if isUnique(err) {
					return fmt.Errorf("agent %s version %d: %w", id, next.Version, store.ErrConflict)
				}
				return err
			}
		} else if _, err := tx.ExecContext(ctx, `UPDATE agent_versions SET body = ? WHERE agent_id = ? AND version = ?`, body, id, next.Version); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE agents SET version = ?, archived = ? WHERE id = ?`, next.Version, archived, id)
		return err
	})
	return out, err
}

// ListAgents implements store.Agents.
func (s *Store) ListAgents(ctx context.Context, q store.ListQuery) ([]store.Item[ma.Agent], error) {
	var where []string
	var args []any
	if !q.IncludeArchived {
		where = append(where, "a.archived = 0")
	}
	if q.CreatedGTE != nil {
		where, args = append(where, "a.created_at >= ?"), append(args, q.CreatedGTE.UnixNano())
	}
	if q.CreatedLTE != nil {
		where, args = append(where, "a.created_at <= ?"), append(args, q.CreatedLTE.UnixNano())
	}
	where, args, tail := page(where, args, "a.pos", q)
	return s.listAgents(ctx, `SELECT a.pos, v.body FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version`+whereClause(where)+tail, args, q)
}

// ListAgentVersions implements store.Agents.
func (s *Store) ListAgentVersions(ctx context.Context, id string, q store.ListQuery) ([]store.Item[ma.Agent], error) {
	if _, err := s.GetAgent(ctx, id, 0); err != nil {
		return nil, err
	}
	where, args, tail := page([]string{"agent_id = ?"}, []any{id}, "version", q)
	return s.listAgents(ctx, `SELECT version, body FROM agent_versions`+whereClause(where)+tail, args, q)
}

func (s *Store) listAgents(ctx context.Context, query string, args []any, q store.ListQuery) ([]store.Item[ma.Agent], error) {
	return listItems[ma.Agent](ctx, s.r, query, args, q)
}
