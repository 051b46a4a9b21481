package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// CreateEnvironment implements store.Environments.
func (s *Store) CreateEnvironment(ctx context.Context, e ma.Environment) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO environments (id, name, created_at, archived, body) VALUES ($1, $2, $3, $4, $5)`,
		e.ID, e.Name, unixOf(e.CreatedAt), e.ArchivedAt != nil, body)
	if isUnique(err) {
		return fmt.Errorf("environment named %q: %w", e.Name, store.ErrConflict)
	}
	return err
}

func getEnv(ctx context.Context, db querier, id, suffix string) (ma.Environment, error) {
	var e ma.Environment
	if err := getJSON(ctx, db, &e, `SELECT body FROM environments WHERE id = $1`+suffix, id); err != nil {
		return ma.Environment{}, notFound(err, "environment", id)
	}
	return e, nil
}

// GetEnvironment implements store.Environments.
func (s *Store) GetEnvironment(ctx context.Context, id string) (ma.Environment, error) {
	return getEnv(ctx, s.pool, id, "")
}

// UpdateEnvironment implements store.Environments.
func (s *Store) UpdateEnvironment(ctx context.Context, id string, fn func(*ma.Environment) error) (ma.Environment, error) {
	var out ma.Environment
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		e, err := getEnv(ctx, tx, id, " FOR UPDATE")
		if err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			return err
		}
		body, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE environments SET name = $1, archived = $2, body = $3 WHERE id = $4`, e.Name, e.ArchivedAt != nil, body, id); err != nil {
			if isUnique(err) {
				return fmt.Errorf("environment named %q: %w", e.Name, store.ErrConflict)
			}
			return err
		}
		out = e
		return nil
	})
	return out, err
}

// ListEnvironments implements store.Environments.
func (s *Store) ListEnvironments(ctx context.Context, l store.ListQuery) ([]store.Item[ma.Environment], error) {
	var q query
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	tail := q.page("pos", l)
	return listItems[ma.Environment](ctx, s.pool, `SELECT pos, body FROM environments`+tail, q.args, l)
}

// DeleteEnvironment implements store.Environments.
func (s *Store) DeleteEnvironment(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM environments WHERE id = $1`, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("environment %s: %w", id, store.ErrNotFound)
	}
	return nil
}
