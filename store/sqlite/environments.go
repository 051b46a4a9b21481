package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// CreateEnvironment implements store.Environments.
func (s *Store) CreateEnvironment(ctx context.Context, e ma.Environment) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO environments (id, name, created_at, body) VALUES (?, ?, ?, ?)`, e.ID, e.Name, unixOf(e.CreatedAt), body)
	if isUnique(err) {
		return fmt.Errorf("environment named %q: %w", e.Name, store.ErrConflict)
	}
	return err
}

func getEnv(ctx context.Context, q querier, id string) (ma.Environment, error) {
	var body []byte
	if err := q.QueryRowContext(ctx, `SELECT body FROM environments WHERE id = ?`, id).Scan(&body); err != nil {
		return ma.Environment{}, notFound(err, "environment", id)
	}
	var e ma.Environment
	err := json.Unmarshal(body, &e)
	return e, err
}

// GetEnvironment implements store.Environments.
func (s *Store) GetEnvironment(ctx context.Context, id string) (ma.Environment, error) {
	return getEnv(ctx, s.r, id)
}

// UpdateEnvironment implements store.Environments.
func (s *Store) UpdateEnvironment(ctx context.Context, id string, fn func(*ma.Environment) error) (ma.Environment, error) {
	var out ma.Environment
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		e, err := getEnv(ctx, tx, id)
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
		archived := 0
		if e.ArchivedAt != nil {
			archived = 1
		}
		if _, err := tx.ExecContext(ctx, `UPDATE environments SET name = ?, archived = ?, body = ? WHERE id = ?`, e.Name, archived, body, id); err != nil {
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
func (s *Store) ListEnvironments(ctx context.Context, q store.ListQuery) ([]store.Item[ma.Environment], error) {
	var where []string
	var args []any
	if !q.IncludeArchived {
		where = append(where, "archived = 0")
	}
	where, args, tail := page(where, args, "pos", q)
	return listItems[ma.Environment](ctx, s.r, `SELECT pos, body FROM environments`+whereClause(where)+tail, args, q)
}

// DeleteEnvironment implements store.Environments.
func (s *Store) DeleteEnvironment(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM environments WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("environment %s: %w", id, store.ErrNotFound)
	}
	return nil
}
