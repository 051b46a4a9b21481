package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// dreamColumns are the columns scanDream reads.
const dreamColumns = `workspace_id, active, plan, claim_owner, body`

// scanDream scans dreamColumns.
func scanDream(row Row) (store.Dream, error) {
	var d store.Dream
	var plan string
	var body []byte
	if err := row.Scan(&d.WorkspaceID, &d.Active, &plan, &d.Owner, &body); err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(plan), &d.Plan); err != nil {
		return d, err
	}
	return d, json.Unmarshal(body, &d.Dream)
}

// dreamRow is the columns a dream is written with.
func dreamRow(d store.Dream) (plan string, body []byte, err error) {
	p, err := json.Marshal(d.Plan)
	if err != nil {
		return "", nil, err
	}
	body, err = json.Marshal(d.Dream)
	return string(p), body, err
}

// CreateDream implements store.Dreams.
func (s *Store) CreateDream(ctx context.Context, d store.Dream) error {
	plan, body, err := dreamRow(d)
	if err != nil {
		return err
	}
	target := d.UpdatesStore()
	return s.withAudit(ctx, func(tx Querier) error {
		if target != "" {
			if err := s.activeDreamOn(ctx, tx, target); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO dreams (id, workspace_id, created_at, status, archived, active, update_store_id, plan, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, workspaceOf(ctx), unixOf(d.CreatedAt), d.Status, d.ArchivedAt != nil, d.Active, target, plan, body)
		return s.conflict(err, "dream "+d.ID)
	})
}

// activeDreamOn returns a *store.DreamConflictError when an active dream
// updates the memory store storeID. It locks the store's row first, so
// that two transactions that check the same store take turns.
func (s *Store) activeDreamOn(ctx context.Context, tx Querier, storeID string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM memory_stores WHERE id = ?`+s.lock(LockUpdate), storeID).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	err = tx.QueryRow(ctx, `SELECT id FROM dreams WHERE update_store_id = ? AND active ORDER BY pos LIMIT 1`, storeID).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return &store.DreamConflictError{StoreID: storeID, DreamID: id}
}

// getDream reads a dream of ctx's workspace; lock ends the query.
func getDream(ctx context.Context, db Querier, id, lock string) (store.Dream, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	d, err := scanDream(db.QueryRow(ctx, `SELECT `+dreamColumns+` FROM dreams WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return d, notFound(err, "dream", id)
}

// GetDream implements store.Dreams.
func (s *Store) GetDream(ctx context.Context, id string) (store.Dream, error) {
	return getDream(ctx, s.r, id, "")
}

// UpdateDream implements store.Dreams.
func (s *Store) UpdateDream(ctx context.Context, id string, fn func(*store.Dream) error) (store.Dream, error) {
	var out store.Dream
	err := s.withAudit(ctx, func(tx Querier) error {
		d, err := getDream(ctx, tx, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		if err := fn(&d); err != nil {
			return err
		}
		plan, body, err := dreamRow(d)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE dreams SET status = ?, archived = ?, active = ?, plan = ?, body = ? WHERE id = ?`,
			d.Status, d.ArchivedAt != nil, d.Active, plan, body, id)
		out = d
		return err
	})
	return out, err
}

// ListDreams implements store.Dreams.
func (s *Store) ListDreams(ctx context.Context, l store.DreamQuery) ([]store.Item[ma.Dream], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	if len(l.Statuses) > 0 {
		q.in("status", l.Statuses)
	}
	q.since("created_at", l.CreatedGT, l.CreatedGTE, l.CreatedLT, l.CreatedLTE)
	return list(ctx, s.r, scanItem[ma.Dream], `SELECT pos, body FROM dreams`, "pos", &q, l.ListQuery)
}

// ClaimDreams implements store.Dreams.
func (s *Store) ClaimDreams(ctx context.Context, owner string, ttl time.Duration) ([]store.Dream, error) {
	var out []store.Dream
	err := s.d.WithTx(ctx, func(tx Querier) error {
		ids, err := collect(ctx, tx, func(r Row) (string, error) {
			var id string
			return id, r.Scan(&id)
		}, `SELECT id FROM dreams WHERE active AND (claim_owner = ? OR claim_owner = '' OR claim_until < `+s.d.Now()+`) ORDER BY pos`+s.lock(LockClaim), owner)
		if err != nil || len(ids) == 0 {
			return err
		}
		in := " IN (?" + strings.Repeat(", ?", len(ids)-1) + ")"
		args := []any{owner, ttl.Nanoseconds()}
		for _, id := range ids {
			args = append(args, id)
		}
		if _, err := tx.Exec(ctx, `UPDATE dreams SET claim_owner = ?, claim_until = `+s.d.Now()+` + ? WHERE id`+in, args...); err != nil {
			return err
		}
		out, err = collect(ctx, tx, scanDream, `SELECT `+dreamColumns+` FROM dreams WHERE id`+in+` ORDER BY pos`, args[2:]...)
		return err
	})
	return out, err
}
