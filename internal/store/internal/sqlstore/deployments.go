package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// deploymentColumns are the columns scanDeployment reads.
const deploymentColumns = `workspace_id, initial, since, body`

// scanDeployment scans deploymentColumns.
func scanDeployment(row Row) (store.Deployment, error) {
	var d store.Deployment
	var initial, body []byte
	var since int64
	if err := row.Scan(&d.WorkspaceID, &initial, &since, &body); err != nil {
		return d, err
	}
	d.Since = time.Unix(0, since).UTC()
	if err := json.Unmarshal(initial, &d.Initial); err != nil {
		return d, err
	}
	return d, json.Unmarshal(body, &d.Deployment)
}

// deploymentRow is the columns a deployment is written with.
func deploymentRow(d store.Deployment) (initial, body []byte, err error) {
	if initial, err = json.Marshal(d.Initial); err != nil {
		return nil, nil, err
	}
	body, err = json.Marshal(d.Deployment)
	return initial, body, err
}

// scheduled tells whether a scheduler fires d.
func scheduled(d store.Deployment) bool {
	return d.Schedule != nil && d.Status == ma.DeploymentActive && d.ArchivedAt == nil
}

// CreateDeployment implements store.Deployments.
func (s *Store) CreateDeployment(ctx context.Context, d store.Deployment) error {
	initial, body, err := deploymentRow(d)
	if err != nil {
		return err
	}
	return s.withAudit(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO deployments (id, workspace_id, created_at, agent_id, status, archived, scheduled, initial, since, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, workspaceOf(ctx), unixOf(d.CreatedAt), d.Agent.ID, d.Status, d.ArchivedAt != nil, scheduled(d), initial, d.Since.UnixNano(), body)
		if err != nil {
			return s.conflict(err, "deployment "+d.ID)
		}
		return s.emitWebhooks(ctx, tx, workspaceOf(ctx), d.ID, "deployment.created")
	})
}

// getDeployment reads a deployment of ctx's workspace; lock ends the
// query.
func getDeployment(ctx context.Context, db Querier, id, lock string) (store.Deployment, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	d, err := scanDeployment(db.QueryRow(ctx, `SELECT `+deploymentColumns+` FROM deployments WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return d, notFound(err, "deployment", id)
}

// GetDeployment implements store.Deployments.
func (s *Store) GetDeployment(ctx context.Context, id string) (store.Deployment, error) {
	return getDeployment(ctx, s.r, id, "")
}

// UpdateDeployment implements store.Deployments.
func (s *Store) UpdateDeployment(ctx context.Context, id string, fn func(*store.Deployment) error) (store.Deployment, error) {
	var out store.Deployment
	err := s.withAudit(ctx, func(tx Querier) error {
		var err error
		out, err = s.updateDeployment(ctx, tx, id, fn)
		return err
	})
	return out, err
}

// updateDeployment is UpdateDeployment in tx.
func (s *Store) updateDeployment(ctx context.Context, tx Querier, id string, fn func(*store.Deployment) error) (store.Deployment, error) {
	d, err := getDeployment(ctx, tx, id, s.lock(LockUpdate))
	if err != nil {
		return d, err
	}
	before := d.Deployment
	if err := fn(&d); err != nil {
		return d, err
	}
	initial, body, err := deploymentRow(d)
	if err != nil {
		return d, err
	}
	_, err = tx.Exec(ctx, `UPDATE deployments SET agent_id = ?, status = ?, archived = ?, scheduled = ?, initial = ?, since = ?, body = ? WHERE id = ?`,
		d.Agent.ID, d.Status, d.ArchivedAt != nil, scheduled(d), initial, d.Since.UnixNano(), body, id)
	if err != nil {
		return d, err
	}
	return d, s.emitWebhooks(ctx, tx, d.WorkspaceID, id, deploymentChangeWebhooks(&before, &d.Deployment)...)
}

// ListDeployments implements store.Deployments.
func (s *Store) ListDeployments(ctx context.Context, l store.DeploymentQuery) ([]store.Item[ma.Deployment], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if !l.IncludeArchived || l.Status != "" {
		q.and("NOT archived")
	}
	if l.Status != "" {
		q.and("status = ?", l.Status)
	}
	if l.AgentID != "" {
		q.and("agent_id = ?", l.AgentID)
	}
	q.since("created_at", nil, l.CreatedGTE, nil, l.CreatedLTE)
	return list(ctx, s.r, scanItem[ma.Deployment], `SELECT pos, body FROM deployments`, "pos", &q, l.ListQuery)
}

// ScheduledDeployments implements store.Deployments.
func (s *Store) ScheduledDeployments(ctx context.Context) ([]store.Deployment, error) {
	return collect(ctx, s.r, scanDeployment, `SELECT `+deploymentColumns+` FROM deployments WHERE scheduled ORDER BY pos`)
}

// CreateDeploymentRun implements store.Deployments.
func (s *Store) CreateDeploymentRun(ctx context.Context, r ma.DeploymentRun, fn func(*store.Deployment) error) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var scheduledAt any
	if at := r.TriggerContext.ScheduledAt; at != nil {
		scheduledAt = unixOf(*at)
	}
	return s.d.WithTx(ctx, func(tx Querier) error {
		if fn != nil {
			if _, err := s.updateDeployment(ctx, tx, r.DeploymentID, fn); err != nil {
				return err
			}
		} else if _, err := getDeployment(ctx, tx, r.DeploymentID, ""); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO deployment_runs (id, workspace_id, deployment_id, created_at, trigger_type, scheduled_at, has_error, pending, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, workspaceOf(ctx), r.DeploymentID, unixOf(r.CreatedAt), r.TriggerContext.Type, scheduledAt, r.Error != nil,
			r.SessionID == nil && r.Error == nil, body)
		if err != nil {
			return s.conflict(err, "deployment run of "+r.DeploymentID)
		}
		return s.emitRunWebhooks(ctx, tx, r.ID, runWebhooks(r, true)...)
	})
}

// getDeploymentRun reads a run of ctx's workspace; lock ends the query.
func getDeploymentRun(ctx context.Context, db Querier, id, lock string) (ma.DeploymentRun, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	r, err := scanJSON[ma.DeploymentRun](db.QueryRow(ctx, `SELECT body FROM deployment_runs WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return r, notFound(err, "deployment run", id)
}

// FinishDeploymentRun implements store.Deployments.
func (s *Store) FinishDeploymentRun(ctx context.Context, id string, sessionID *string, runErr *ma.DeploymentRunError) (ma.DeploymentRun, error) {
	var out ma.DeploymentRun
	err := s.d.WithTx(ctx, func(tx Querier) error {
		var err error
		out, err = s.finishDeploymentRun(ctx, tx, id, sessionID, runErr)
		return err
	})
	return out, err
}

// finishDeploymentRun records the outcome of a pending run in tx; a run
// that has one already is an ErrConflict.
func (s *Store) finishDeploymentRun(ctx context.Context, tx Querier, id string, sessionID *string, runErr *ma.DeploymentRunError) (ma.DeploymentRun, error) {
	r, err := getDeploymentRun(ctx, tx, id, s.lock(LockUpdate))
	if err != nil {
		return r, err
	}
	if r.SessionID != nil || r.Error != nil {
		return r, fmt.Errorf("deployment run %s has its outcome already: %w", id, store.ErrConflict)
	}
	r.SessionID, r.Error = sessionID, runErr
	body, err := json.Marshal(r)
	if err != nil {
		return r, err
	}
	if _, err = tx.Exec(ctx, `UPDATE deployment_runs SET has_error = ?, pending = ?, body = ? WHERE id = ?`, runErr != nil, false, body, id); err != nil {
		return r, err
	}
	return r, s.emitRunWebhooks(ctx, tx, id, runWebhooks(r, false)...)
}

// AbandonDeploymentRuns implements store.Deployments.
func (s *Store) AbandonDeploymentRuns(ctx context.Context, before time.Time, runErr ma.DeploymentRunError) ([]ma.DeploymentRun, error) {
	ids, err := collect(ctx, s.r, func(row Row) (string, error) {
		var id string
		return id, row.Scan(&id)
	}, `SELECT id FROM deployment_runs WHERE pending AND created_at < ? ORDER BY pos`, before.UnixNano())
	if err != nil {
		return nil, err
	}
	var out []ma.DeploymentRun
	for _, id := range ids {
		var r ma.DeploymentRun
		err := s.d.WithTx(ctx, func(tx Querier) error {
			var err error
			r, err = s.finishDeploymentRun(ctx, tx, id, nil, &runErr)
			return err
		})
		switch {
		case errors.Is(err, store.ErrConflict): // its session was created meanwhile
		case err != nil:
			return out, err
		default:
			out = append(out, r)
		}
	}
	return out, nil
}

// FinishDeploymentRun implements store.Tx: the session's run, finished
// in the session's transaction.
func (t *sessionTx) FinishDeploymentRun(runID string) error {
	_, err := t.s.finishDeploymentRun(t.ctx, t.tx, runID, &t.sess.ID, nil)
	return err
}

// GetDeploymentRun implements store.Deployments.
func (s *Store) GetDeploymentRun(ctx context.Context, id string) (ma.DeploymentRun, error) {
	return getDeploymentRun(ctx, s.r, id, "")
}

// ListDeploymentRuns implements store.Deployments.
func (s *Store) ListDeploymentRuns(ctx context.Context, l store.DeploymentRunQuery) ([]store.Item[ma.DeploymentRun], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if l.DeploymentID != "" {
		q.and("deployment_id = ?", l.DeploymentID)
	}
	if l.TriggerType != "" {
		q.and("trigger_type = ?", l.TriggerType)
	}
	if l.HasError != nil {
		if *l.HasError {
			q.and("has_error")
		} else {
			q.and("NOT has_error")
		}
	}
	q.since("created_at", l.CreatedGT, l.CreatedGTE, l.CreatedLT, l.CreatedLTE)
	return list(ctx, s.r, scanItem[ma.DeploymentRun], `SELECT pos, body FROM deployment_runs`, "pos", &q, l.ListQuery)
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
