package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
)

// webhookColumns are the columns scanWebhookEndpoint reads.
const webhookColumns = `id, workspace_id, url, name, description, enabled_events, state, disabled_reason, sealed, created_at, updated_at`

func scanWebhookEndpoint(row Row) (store.WebhookEndpoint, error) {
	var e store.WebhookEndpoint
	var events string
	var created, updated int64
	if err := row.Scan(&e.ID, &e.WorkspaceID, &e.URL, &e.Name, &e.Description, &events, &e.State, &e.DisabledReason, &e.SealedSecret, &created, &updated); err != nil {
		return e, err
	}
	e.CreatedAt, e.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return e, json.Unmarshal([]byte(events), &e.EnabledEvents)
}

// CreateWebhookEndpoint implements store.Webhooks.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e store.WebhookEndpoint) error {
	events, err := json.Marshal(e.EnabledEvents)
	if err != nil {
		return err
	}
	return s.withAudit(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO webhook_endpoints (id, workspace_id, url, name, description, enabled_events, state, disabled_reason, sealed, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, workspaceOf(ctx), e.URL, e.Name, e.Description, string(events), e.State, e.DisabledReason, e.SealedSecret, e.CreatedAt.UnixNano(), e.UpdatedAt.UnixNano())
		return s.conflict(err, "webhook endpoint "+e.ID)
	})
}

// getWebhookEndpoint reads an endpoint of ctx's workspace; lock ends the
// query.
func getWebhookEndpoint(ctx context.Context, db Querier, id, lock string) (store.WebhookEndpoint, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	e, err := scanWebhookEndpoint(db.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhook_endpoints WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return e, notFound(err, "webhook endpoint", id)
}

// GetWebhookEndpoint implements store.Webhooks.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (store.WebhookEndpoint, error) {
	return getWebhookEndpoint(ctx, s.r, id, "")
}

// UpdateWebhookEndpoint implements store.Webhooks.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, id string, fn func(*store.WebhookEndpoint) error) (store.WebhookEndpoint, error) {
	var out store.WebhookEndpoint
	err := s.withAudit(ctx, func(tx Querier) error {
		e, err := getWebhookEndpoint(ctx, tx, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		was := e.State
		if err := fn(&e); err != nil {
			return err
		}
		events, err := json.Marshal(e.EnabledEvents)
		if err != nil {
			return err
		}
		failures := "failures"
		if e.State != was {
			failures = "0" // a state change starts the count again
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET url = ?, name = ?, description = ?, enabled_events = ?, state = ?, disabled_reason = ?, sealed = ?, updated_at = ?, failures = `+failures+` WHERE id = ?`,
			e.URL, e.Name, e.Description, string(events), e.State, e.DisabledReason, e.SealedSecret, e.UpdatedAt.UnixNano(), id); err != nil {
			return err
		}
		if e.State == store.WebhookDisabled {
			_, err = tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE endpoint_id = ?`, id)
		}
		out = e
		return err
	})
	return out, err
}

// ListWebhookEndpoints implements store.Webhooks.
func (s *Store) ListWebhookEndpoints(ctx context.Context) ([]store.WebhookEndpoint, error) {
	var q query
	q.scope(ctx, "workspace_id")
	return collect(ctx, s.r, scanWebhookEndpoint, `SELECT `+webhookColumns+` FROM webhook_endpoints`+q.clause()+` ORDER BY pos`, q.args...)
}

// DeleteWebhookEndpoint implements store.Webhooks.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	return s.withAudit(ctx, func(tx Querier) error {
		cond, args := inWorkspace(ctx, "workspace_id")
		n, err := tx.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = ?`+cond, append([]any{id}, args...)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("webhook endpoint %s: %w", id, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE endpoint_id = ?`, id)
		return err
	})
}

// EnqueueWebhookEvent implements store.Webhooks.
func (s *Store) EnqueueWebhookEvent(ctx context.Context, ev store.WebhookEvent) error {
	return s.d.WithTx(ctx, func(tx Querier) error { return s.EnqueueWebhook(ctx, tx, ev) })
}

// EnqueueWebhook queues ev, in the transaction tx of the change it
// reports, for every enabled endpoint of ev's workspace subscribed to
// its type at this moment; with none, it writes nothing. It is the one
// way events reach the outbox: the store's writes that report a change
// (sessions, agents, …) call it inside their transaction, so that an
// event is queued exactly when its change commits.
func (s *Store) EnqueueWebhook(ctx context.Context, tx Querier, ev store.WebhookEvent) error {
	targets, err := subscribed(ctx, tx, ev.WorkspaceID, ev.Type)
	if err != nil || len(targets) == 0 {
		return err
	}
	if ev.ID == "" {
		ev.ID = ids.New(ids.WebhookEvent)
	}
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = time.Now()
	}
	body, err := webhookEnvelope(ev)
	if err != nil {
		return err
	}
	for _, endpoint := range targets {
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, body, attempts, due_at)
			VALUES (?, ?, ?, ?, 0, `+s.d.Now()+`)`, endpoint, ev.ID, ev.Type, body); err != nil {
			return err
		}
	}
	return nil
}

// subscribed returns the enabled endpoints of workspace ws subscribed to
// the event type typ. The types are matched here rather than in SQL: a
// LIKE with a bound pattern makes SQLite compile its statement again at
// every run, and most workspaces have no endpoint, which costs one
// indexed read.
func subscribed(ctx context.Context, tx Querier, ws, typ string) ([]string, error) {
	type endpoint struct {
		id     string
		events []byte
	}
	all, err := collect(ctx, tx, func(r Row) (endpoint, error) {
		var e endpoint
		err := r.Scan(&e.id, &e.events)
		return e, err
	}, `SELECT id, enabled_events FROM webhook_endpoints WHERE workspace_id = ? AND state = 'enabled'`, ws)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range all {
		var types []string
		if err := json.Unmarshal(e.events, &types); err != nil {
			return nil, fmt.Errorf("webhook endpoint %s: enabled_events: %w", e.id, err)
		}
		if slices.Contains(types, typ) {
			out = append(out, e.id)
		}
	}
	return out, nil
}

// webhookEnvelope is the thin envelope of ev, as sent.
func webhookEnvelope(ev store.WebhookEvent) ([]byte, error) {
	data := map[string]string{}
	for k, v := range ev.Extra {
		data[k] = v
	}
	data["type"], data["id"], data["workspace_id"] = ev.Type, ev.ResourceID, ev.WorkspaceID
	return json.Marshal(struct {
		Type      string            `json:"type"`
		ID        string            `json:"id"`
		CreatedAt string            `json:"created_at"`
		Data      map[string]string `json:"data"`
	}{"event", ev.ID, ev.CreatedAt.UTC().Format(time.RFC3339Nano), data})
}

// ClaimWebhookDeliveries implements store.Webhooks.
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, lease time.Duration, limit int) ([]store.WebhookDelivery, error) {
	var out []store.WebhookDelivery
	err := s.d.WithTx(ctx, func(tx Querier) error {
		pos, err := collect(ctx, tx, func(r Row) (int64, error) {
			var p int64
			return p, r.Scan(&p)
		}, `SELECT pos FROM webhook_deliveries WHERE due_at <= `+s.d.Now()+` ORDER BY due_at LIMIT ?`+s.lock(LockClaim), limit)
		if err != nil || len(pos) == 0 {
			return err
		}
		in := " IN (?" + strings.Repeat(", ?", len(pos)-1) + ")"
		args := []any{lease.Nanoseconds()}
		for _, p := range pos {
			args = append(args, p)
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET attempts = attempts + 1, due_at = `+s.d.Now()+` + ? WHERE pos`+in, args...); err != nil {
			return err
		}
		out, err = collect(ctx, tx, scanWebhookDelivery, `SELECT d.endpoint_id, d.event_id, d.event_type, d.body, d.attempts, e.url, e.sealed
			FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.pos`+in+` ORDER BY d.pos`, args[1:]...)
		return err
	})
	return out, err
}

func scanWebhookDelivery(r Row) (store.WebhookDelivery, error) {
	var d store.WebhookDelivery
	err := r.Scan(&d.EndpointID, &d.EventID, &d.EventType, &d.Body, &d.Attempts, &d.URL, &d.SealedSecret)
	return d, err
}

// SettleWebhookDelivery implements store.Webhooks.
func (s *Store) SettleWebhookDelivery(ctx context.Context, d store.WebhookDelivery, o store.WebhookOutcome) error {
	return s.d.WithTx(ctx, func(tx Querier) error {
		switch {
		case o.Delivered:
			if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET failures = 0 WHERE id = ?`, d.EndpointID); err != nil {
				return err
			}
		case o.RetryIn > 0 && o.Disable == "":
			_, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET due_at = `+s.d.Now()+` + ? WHERE endpoint_id = ? AND event_id = ?`,
				o.RetryIn.Nanoseconds(), d.EndpointID, d.EventID)
			return err
		default:
			if err := s.dropped(ctx, tx, d.EndpointID, o); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?`, d.EndpointID, d.EventID)
		return err
	})
}

// dropped counts a failed delivery of the endpoint and disables it when
// o says so.
func (s *Store) dropped(ctx context.Context, tx Querier, endpointID string, o store.WebhookOutcome) error {
	if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET failures = failures + 1 WHERE id = ?`, endpointID); err != nil {
		return err
	}
	reason := o.Disable
	if reason == "" && o.DisableAfter > 0 {
		var n int
		if err := tx.QueryRow(ctx, `SELECT failures FROM webhook_endpoints WHERE id = ?`, endpointID).Scan(&n); err != nil {
			return notFound(err, "webhook endpoint", endpointID)
		}
		if n >= o.DisableAfter {
			reason = fmt.Sprintf("%d deliveries in a row failed with no 2xx response", n)
		}
	}
	if reason == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET state = 'disabled', disabled_reason = ?, updated_at = ? WHERE id = ? AND state = 'enabled'`,
		reason, time.Now().UnixNano(), endpointID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE endpoint_id = ?`, endpointID)
	return err
}

// CountWebhookDeliveries implements store.Webhooks.
func (s *Store) CountWebhookDeliveries(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRow(ctx, `SELECT COUNT(*) FROM webhook_deliveries`).Scan(&n)
	return n, err
}
