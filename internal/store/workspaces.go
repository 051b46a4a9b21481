package store

import (
	"context"
	"encoding/json"
	"time"
)

// DefaultWorkspace is the workspace every install starts with. Data made
// before workspaces existed belongs to it, and so does anything created
// without a workspace in its context. It cannot be archived.
const DefaultWorkspace = "wrkspc_default"

// Roles of an API key.
const (
	// RoleAdmin manages workspaces, keys and settings, reads the audit
	// log, and works in any workspace (the anthropic-workspace-id header
	// picks one; DefaultWorkspace without it). Its scope is the
	// organization: APIKey.WorkspaceID is "".
	RoleAdmin = "admin"
	// RoleDeveloper works inside its workspace only: it creates, changes
	// and reads the workspace's resources; other workspaces' are not found.
	RoleDeveloper = "developer"
	// RoleReadOnly reads its workspace's resources (dashboards); every
	// write is refused.
	RoleReadOnly = "read_only"
)

// API key statuses, as the Admin API names them.
const (
	KeyActive   = "active"
	KeyInactive = "inactive" // refused until made active again
	KeyArchived = "archived" // revoked for good (RevokedAt is set)
)

// Workspace groups agents, environments, sessions, vaults, files, skills
// and machines; a workspace-bound key sees only its workspace's.
type Workspace struct {
	ID           string
	Name         string
	DisplayColor string
	Tags         map[string]string
	CreatedAt    time.Time
	ArchivedAt   *time.Time
}

// WorkspaceQuery lists workspaces.
type WorkspaceQuery struct {
	ListQuery
	// IncludeDefault lists DefaultWorkspace too.
	IncludeDefault bool
	// IDs, if set, keeps only these workspaces.
	IDs []string
}

// Workspaces stores workspaces.
type Workspaces interface {
	CreateWorkspace(ctx context.Context, w Workspace) error
	GetWorkspace(ctx context.Context, id string) (Workspace, error)
	// UpdateWorkspace applies fn to the workspace in one transaction.
	UpdateWorkspace(ctx context.Context, id string, fn func(*Workspace) error) (Workspace, error)
	ListWorkspaces(ctx context.Context, q WorkspaceQuery) ([]Item[Workspace], error)
}

// AuditEvent is one entry of the audit log: who changed what, when.
type AuditEvent struct {
	ID string
	At time.Time
	// ActorKeyID is the API key that made the change ("" for the
	// bootstrap key or the command line, named in Actor).
	ActorKeyID string
	// Actor names the actor when no key id does: "bootstrap", "cli".
	Actor string
	// Action is "<target type>.<verb>": api_key.created, workspace.archived,
	// vault.updated, vault_credential.deleted…
	Action      string
	TargetType  string
	TargetID    string
	WorkspaceID string // "" for organization-level targets (workspaces, admin keys)
	// Details holds what changed (names, statuses), never a secret.
	Details json.RawMessage
}

// AuditQuery lists the audit log.
type AuditQuery struct {
	ListQuery
	WorkspaceID string // "" = every workspace
	Action      string // "" = every action
}

// Audit stores the audit log. Entries are appended in the transaction of
// the change they describe (WithAudit); there is no other write.
type Audit interface {
	ListAudit(ctx context.Context, q AuditQuery) ([]Item[AuditEvent], error)
}

type workspaceKey struct{}

// WithWorkspace scopes the store calls made with the returned context to
// the workspace: creations belong to it, and reads, lists, updates and
// deletes of agents, environments, sessions, vaults, files, skills and
// machines of another workspace find nothing (ErrNotFound). Calls without
// a workspace in their context are not scoped: the server's own work (a
// session's runner, the tool host) reaches any workspace by id, and
// creates in DefaultWorkspace.
//
// The HTTP API sets it on every request an API key makes, so the rule that
// keeps workspaces apart lives in one place, the store's queries.
func WithWorkspace(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, workspaceKey{}, id)
}

// WorkspaceFrom returns ctx's workspace, if it has one.
func WorkspaceFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(workspaceKey{}).(string)
	return id, ok && id != ""
}

type auditKey struct{}

// WithAudit asks the store to append e to the audit log in the same
// transaction as the change made with the returned context (API keys,
// workspaces, vaults and their credentials): the change and its record
// commit together or not at all.
func WithAudit(ctx context.Context, e AuditEvent) context.Context {
	return context.WithValue(ctx, auditKey{}, e)
}

// AuditFrom returns the audit entry ctx has to record, if any.
func AuditFrom(ctx context.Context) (AuditEvent, bool) {
	e, ok := ctx.Value(auditKey{}).(AuditEvent)
	return e, ok
}

// KeyAdmin is what the Admin API needs of the key store beyond Keys.
type KeyAdmin interface {
	// GetAPIKey returns the key with that id.
	GetAPIKey(ctx context.Context, id string) (APIKey, error)
	// UpdateAPIKey applies fn to the key in one transaction (name,
	// status; archiving sets RevokedAt). An AuditFrom entry in ctx is
	// recorded in that transaction.
	UpdateAPIKey(ctx context.Context, id string, fn func(*APIKey) error) (APIKey, error)
}
