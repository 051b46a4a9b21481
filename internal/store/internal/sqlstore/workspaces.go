package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
)

// The one rule that keeps workspaces apart (store.WithWorkspace): every
// statement on the rows of a workspaced table (agents, environments,
// sessions, vaults, files, skills, machines) ends its WHERE clause with
// inWorkspace, or for a child table (agent versions, credentials, skill
// versions, events) with inParentWorkspace; every insert stamps
// workspaceOf. A context without a workspace adds no condition.

// inWorkspace returns the condition " AND col = ?" and its argument that
// keep a statement to the rows of ctx's workspace, or "" and no argument
// when ctx has none (the server's own work reaches every workspace).
func inWorkspace(ctx context.Context, col string) (string, []any) {
	ws, ok := store.WorkspaceFrom(ctx)
	if !ok {
		return "", nil
	}
	return " AND " + col + " = ?", []any{ws}
}

// inParentWorkspace is inWorkspace for the rows of a child table whose
// column col holds the id of a row of parent (a workspaced table).
func inParentWorkspace(ctx context.Context, col, parent string) (string, []any) {
	ws, ok := store.WorkspaceFrom(ctx)
	if !ok {
		return "", nil
	}
	return " AND " + col + " IN (SELECT id FROM " + parent + " WHERE workspace_id = ?)", []any{ws}
}

// scope adds ctx's workspace condition on col to q.
func (q *query) scope(ctx context.Context, col string) { q.andScope(inWorkspace(ctx, col)) }

// scopeParent adds ctx's workspace condition on col, the id of a row of
// parent, to q.
func (q *query) scopeParent(ctx context.Context, col, parent string) {
	q.andScope(inParentWorkspace(ctx, col, parent))
}

// andScope adds a condition of inWorkspace or inParentWorkspace to q.
func (q *query) andScope(cond string, args []any) {
	if cond != "" {
		q.and(strings.TrimPrefix(cond, " AND "), args...)
	}
}

// workspaceOf is the workspace a row created with ctx belongs to.
func workspaceOf(ctx context.Context) string {
	if ws, ok := store.WorkspaceFrom(ctx); ok {
		return ws
	}
	return store.DefaultWorkspace
}

// recordAuditOf appends ctx's store.WithAudit entry, if any, in tx: the
// one write of the audit log, made by the transaction of the change the
// entry records.
func recordAuditOf(ctx context.Context, tx Querier) error {
	e, ok := store.AuditFrom(ctx)
	if !ok {
		return nil
	}
	if e.ID == "" {
		e.ID = ids.New(ids.AuditEvent)
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	var details any
	if len(e.Details) > 0 {
		details = string(e.Details)
	}
	_, err := tx.Exec(ctx, `INSERT INTO audit_log (id, at, actor_key_id, actor, action, target_type, target_id, workspace_id, details)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.At.UnixNano(), e.ActorKeyID, e.Actor, e.Action, e.TargetType, e.TargetID, e.WorkspaceID, details)
	if err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	return nil
}

// withAudit runs fn in a write transaction that also records ctx's audit
// entry, if any.
func (s *Store) withAudit(ctx context.Context, fn func(tx Querier) error) error {
	return s.d.WithTx(ctx, func(tx Querier) error {
		if err := fn(tx); err != nil {
			return err
		}
		return recordAuditOf(ctx, tx)
	})
}

// ListAudit implements store.Audit. Items are in append order (Pos);
// q.Desc lists the newest first. The log is the organization's: ctx's
// workspace does not scope it, q.WorkspaceID filters it.
func (s *Store) ListAudit(ctx context.Context, aq store.AuditQuery) ([]store.Item[store.AuditEvent], error) {
	var q query
	if aq.WorkspaceID != "" {
		q.and("workspace_id = ?", aq.WorkspaceID)
	}
	if aq.Action != "" {
		q.and("action = ?", aq.Action)
	}
	q.since("at", nil, aq.CreatedGTE, nil, aq.CreatedLTE)
	return list(ctx, s.r, scanAudit, `SELECT pos, id, at, actor_key_id, actor, action, target_type, target_id, workspace_id, details FROM audit_log`, "pos", &q, aq.ListQuery)
}

func scanAudit(row Row) (store.Item[store.AuditEvent], error) {
	var it store.Item[store.AuditEvent]
	e := &it.Value
	var at int64
	var details *string
	if err := row.Scan(&it.Pos, &e.ID, &at, &e.ActorKeyID, &e.Actor, &e.Action, &e.TargetType, &e.TargetID, &e.WorkspaceID, &details); err != nil {
		return it, err
	}
	e.At = time.Unix(0, at).UTC()
	if details != nil {
		e.Details = json.RawMessage(*details)
	}
	return it, nil
}

// CreateWorkspace implements store.Workspaces.
func (s *Store) CreateWorkspace(ctx context.Context, w store.Workspace) error {
	tags, err := tagsJSON(w.Tags)
	if err != nil {
		return err
	}
	return s.withAudit(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO workspaces (id, name, display_color, tags, created_at, archived_at) VALUES (?, ?, ?, ?, ?, ?)`,
			w.ID, w.Name, w.DisplayColor, tags, w.CreatedAt.UnixNano(), nsPtr(w.ArchivedAt))
		return s.conflict(err, "workspace "+w.ID)
	})
}

func tagsJSON(tags map[string]string) (string, error) {
	if tags == nil {
		tags = map[string]string{}
	}
	b, err := json.Marshal(tags)
	return string(b), err
}

const workspaceCols = `pos, id, name, display_color, tags, created_at, archived_at`

func scanWorkspace(row Row) (store.Item[store.Workspace], error) {
	var it store.Item[store.Workspace]
	w := &it.Value
	var tags string
	var created int64
	var archived *int64
	if err := row.Scan(&it.Pos, &w.ID, &w.Name, &w.DisplayColor, &tags, &created, &archived); err != nil {
		return it, err
	}
	w.CreatedAt = time.Unix(0, created).UTC()
	w.ArchivedAt = timePtr(archived)
	if err := json.Unmarshal([]byte(tags), &w.Tags); err != nil {
		return it, fmt.Errorf("workspace %s: tags: %w", w.ID, err)
	}
	return it, nil
}

func getWorkspace(ctx context.Context, db Querier, id, lock string) (store.Workspace, error) {
	it, err := scanWorkspace(db.QueryRow(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = ?`+lock, id))
	return it.Value, notFound(err, "workspace", id)
}

// GetWorkspace implements store.Workspaces.
func (s *Store) GetWorkspace(ctx context.Context, id string) (store.Workspace, error) {
	return getWorkspace(ctx, s.r, id, "")
}

// UpdateWorkspace implements store.Workspaces. The id and the creation
// time stay; archiving store.DefaultWorkspace is refused (ErrConflict).
func (s *Store) UpdateWorkspace(ctx context.Context, id string, fn func(*store.Workspace) error) (store.Workspace, error) {
	var out store.Workspace
	err := s.withAudit(ctx, func(tx Querier) error {
		cur, err := getWorkspace(ctx, tx, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		w := cur
		if err := fn(&w); err != nil {
			return err
		}
		w.ID, w.CreatedAt = cur.ID, cur.CreatedAt
		if id == store.DefaultWorkspace && w.ArchivedAt != nil {
			return fmt.Errorf("the default workspace cannot be archived: %w", store.ErrConflict)
		}
		tags, err := tagsJSON(w.Tags)
		if err != nil {
			return err
		}
		out = w
		_, err = tx.Exec(ctx, `UPDATE workspaces SET name = ?, display_color = ?, tags = ?, archived_at = ? WHERE id = ?`,
			w.Name, w.DisplayColor, tags, nsPtr(w.ArchivedAt), id)
		return err
	})
	return out, err
}

// ListWorkspaces implements store.Workspaces.
func (s *Store) ListWorkspaces(ctx context.Context, wq store.WorkspaceQuery) ([]store.Item[store.Workspace], error) {
	var q query
	if !wq.IncludeDefault {
		q.and("id <> ?", store.DefaultWorkspace)
	}
	if !wq.IncludeArchived {
		q.and("archived_at IS NULL")
	}
	if len(wq.IDs) > 0 {
		q.in("id", wq.IDs)
	}
	q.since("created_at", nil, wq.CreatedGTE, nil, wq.CreatedLTE)
	return list(ctx, s.r, scanWorkspace, `SELECT `+workspaceCols+` FROM workspaces`, "pos", &q, wq.ListQuery)
}
