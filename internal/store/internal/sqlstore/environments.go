package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// CreateEnvironment implements store.Environments.
func (s *Store) CreateEnvironment(ctx context.Context, e ma.Environment) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.d.WithTx(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO environments (id, name, created_at, archived, body, workspace_id) VALUES (?, ?, ?, ?, ?, ?)`,
			e.ID, e.Name, unixOf(e.CreatedAt), e.ArchivedAt != nil, body, workspaceOf(ctx))
		if err != nil {
			return s.conflict(err, fmt.Sprintf("environment named %q", e.Name))
		}
		if err := s.emitWebhooks(ctx, tx, workspaceOf(ctx), e.ID, "environment.created"); err != nil {
			return err
		}
		return recordOutcomeOf(ctx, tx)
	})
}

func getEnv(ctx context.Context, db Querier, id, lock string) (ma.Environment, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	e, err := scanJSON[ma.Environment](db.QueryRow(ctx, `SELECT body FROM environments WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return e, notFound(err, "environment", id)
}

// GetEnvironment implements store.Environments.
func (s *Store) GetEnvironment(ctx context.Context, id string) (ma.Environment, error) {
	return getEnv(ctx, s.r, id, "")
}

// UpdateEnvironment implements store.Environments.
func (s *Store) UpdateEnvironment(ctx context.Context, id string, fn func(*ma.Environment) error) (ma.Environment, error) {
	var out ma.Environment
	err := s.d.WithTx(ctx, func(tx Querier) error {
		e, err := getEnv(ctx, tx, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		was := e.ArchivedAt
		if err := fn(&e); err != nil {
			return err
		}
		if err := s.emitChange(ctx, tx, "environments", "environment", id, was, e.ArchivedAt, true); err != nil {
			return err
		}
		body, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE environments SET name = ?, archived = ?, body = ? WHERE id = ?`, e.Name, e.ArchivedAt != nil, body, id); err != nil {
			return s.conflict(err, fmt.Sprintf("environment named %q", e.Name))
		}
		out = e
		return nil
	})
	return out, err
}

// ListEnvironments implements store.Environments.
func (s *Store) ListEnvironments(ctx context.Context, l store.ListQuery) ([]store.Item[ma.Environment], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	return list(ctx, s.r, scanItem[ma.Environment], `SELECT pos, body FROM environments`, "pos", &q, l)
}

// DeleteEnvironment implements store.Environments.
func (s *Store) DeleteEnvironment(ctx context.Context, id string) error {
	return s.d.WithTx(ctx, func(tx Querier) error {
		return s.deleteEmitting(ctx, tx, "environments", "environment", id)
	})
}
