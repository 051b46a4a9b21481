package sqlstore

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// This file is the one place that maps the store's changes of sessions
// and resources to the webhook event types they emit (docs/webhooks.md).

// sessionEventWebhooks are the webhook types an appended session event
// emits.
func sessionEventWebhooks(ev *ma.Event) []string {
	switch ev.Type {
	case ma.EventStatusRunning:
		return []string{"session.status_run_started"}
	case ma.EventStatusRescheduled:
		return []string{"session.status_rescheduled"}
	case ma.EventStatusTerminated:
		return []string{"session.status_terminated"}
	case ma.EventStatusIdle:
		out := []string{"session.status_idled"}
		if ev.StopReason != nil {
			switch ev.StopReason.Type {
			case ma.StopRequiresAction:
				out = append(out, "session.requires_action")
			case "budget_reached":
				out = append(out, "session.budget_reached")
			}
		}
		return out
	}
	return nil
}

// sessionUpdatable is what of a session a client updates: a change of it
// is a session.updated.
func sessionUpdatable(s *ma.Session) string {
	b, _ := json.Marshal([]any{s.Title, s.Metadata, s.VaultIDs, s.Agent, s.Budget})
	return string(b)
}

// sessionChangeWebhooks are the webhook types an update of a session
// emits, given what sessionUpdatable said of it before.
func sessionChangeWebhooks(before string, wasArchived bool, after *ma.Session) []string {
	var out []string
	if sessionUpdatable(after) != before {
		out = append(out, "session.updated")
	}
	if !wasArchived && after.ArchivedAt != nil {
		out = append(out, "session.archived")
	}
	return out
}

// resourceChangeWebhooks are the webhook types of a resource (kind:
// agent, environment, vault, memory_store) whose archived_at went from
// before to after.
func resourceChangeWebhooks(kind string, before, after *string) []string {
	if before == nil && after != nil {
		return []string{kind + ".archived"}
	}
	return nil
}

// emitWebhooks queues the events types of the resource id of workspace
// ws in tx.
func (s *Store) emitWebhooks(ctx context.Context, tx Querier, ws, id string, types ...string) error {
	for _, typ := range types {
		if err := s.EnqueueWebhook(ctx, tx, store.WebhookEvent{Type: typ, ResourceID: id, WorkspaceID: ws}); err != nil {
			return err
		}
	}
	return nil
}

// emit queues the webhook events types of the transaction's session.
func (t *sessionTx) emit(types ...string) error {
	if len(types) == 0 {
		return nil
	}
	if t.workspace == "" {
		if err := t.tx.QueryRow(t.ctx, `SELECT workspace_id FROM sessions WHERE id = ?`, t.sess.ID).Scan(&t.workspace); err != nil {
			return notFound(err, "session", t.sess.ID)
		}
	}
	return t.s.emitWebhooks(t.ctx, t.tx, t.workspace, t.sess.ID, types...)
}

// emitChange queues the events of an update of the resource id (kind,
// in table): kind.archived when archived_at went from before to after,
// else kind.updated when updated is true (agents and environments emit
// it; vaults and memory stores have no such event).
func (s *Store) emitChange(ctx context.Context, tx Querier, table, kind, id string, before, after *string, updated bool) error {
	types := resourceChangeWebhooks(kind, before, after)
	if len(types) == 0 && updated {
		types = []string{kind + ".updated"}
	}
	if len(types) == 0 {
		return nil
	}
	var ws string
	if err := tx.QueryRow(ctx, `SELECT workspace_id FROM `+table+` WHERE id = ?`, id).Scan(&ws); err != nil {
		return notFound(err, kind, id)
	}
	return s.emitWebhooks(ctx, tx, ws, id, types...)
}

// deleteEmitting deletes the row id of ctx's workspace from table and
// queues kind.deleted; ErrNotFound when there is no such row.
func (s *Store) deleteEmitting(ctx context.Context, tx Querier, table, kind, id string) error {
	cond, args := inWorkspace(ctx, "workspace_id")
	var ws string
	if err := tx.QueryRow(ctx, `SELECT workspace_id FROM `+table+` WHERE id = ?`+cond, append([]any{id}, args...)...).Scan(&ws); err != nil {
		return notFound(err, strings.ReplaceAll(kind, "_", " "), id)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE id = ?`, id); err != nil {
		return err
	}
	return s.emitWebhooks(ctx, tx, ws, id, kind+".deleted")
}

// deploymentUpdatable is what of a deployment a client updates (not its
// last_run_at or upcoming runs, which the scheduler moves).
func deploymentUpdatable(d *ma.Deployment) string {
	b, _ := json.Marshal([]any{d.Name, d.Description, d.Agent, d.EnvironmentID, d.InitialEvents, d.Resources, d.VaultIDs, d.Metadata, d.Schedule, d.Budget})
	return string(b)
}

// deploymentChangeWebhooks are the webhook types of a deployment's
// change from before to after: archived, paused or unpaused, else updated
// when what a client updates changed.
func deploymentChangeWebhooks(before, after *ma.Deployment) []string {
	switch {
	case before.ArchivedAt == nil && after.ArchivedAt != nil:
		return []string{"deployment.archived"}
	case before.Status != after.Status && after.Status == ma.DeploymentPaused:
		return []string{"deployment.paused"}
	case before.Status != after.Status && after.Status == ma.DeploymentActive:
		return []string{"deployment.unpaused"}
	case deploymentUpdatable(before) != deploymentUpdatable(after):
		return []string{"deployment.updated"}
	}
	return nil
}

// runWebhooks are the webhook types of a deployment run when it is
// recorded (created) or finished: scheduled runs only, as the hosted
// product emits none for manual runs.
func runWebhooks(r ma.DeploymentRun, created bool) []string {
	switch {
	case r.TriggerContext.Type != "schedule":
		return nil
	case created:
		return []string{"deployment_run.started"}
	case r.Error != nil:
		return []string{"deployment_run.failed"}
	}
	return []string{"deployment_run.succeeded"}
}

// emitRunWebhooks queues the events types of the deployment run id in tx.
func (s *Store) emitRunWebhooks(ctx context.Context, tx Querier, id string, types ...string) error {
	if len(types) == 0 {
		return nil
	}
	var ws string
	if err := tx.QueryRow(ctx, `SELECT workspace_id FROM deployment_runs WHERE id = ?`, id).Scan(&ws); err != nil {
		return notFound(err, "deployment run", id)
	}
	return s.emitWebhooks(ctx, tx, ws, id, types...)
}
