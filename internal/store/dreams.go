package store

import (
	"context"
	"fmt"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// Dreams stores dreams: their API object and what the server that runs
// them keeps of each (Dream). Dreams are scoped to ctx's workspace
// (WithWorkspace), but ClaimDreams, which serves every workspace. A
// create or update records ctx's WithAudit entry, if any, in its
// transaction.
type Dreams interface {
	// CreateDream stores a new dream in ctx's workspace. A dream that
	// updates a memory store in place (update_existing) is refused with a
	// *DreamConflictError while another dream that updates that store is
	// Active: the check and the insert run in one transaction that locks
	// the store's row.
	CreateDream(ctx context.Context, d Dream) error
	// GetDream returns a dream, archived or not.
	GetDream(ctx context.Context, id string) (Dream, error)
	// UpdateDream reads the dream, calls fn and writes it back,
	// atomically. An error from fn is returned as is. fn does not change
	// the claim (Owner).
	UpdateDream(ctx context.Context, id string, fn func(cur *Dream) error) (Dream, error)
	// ListDreams lists dreams in creation order (q.Desc: newest first)
	// with q's filters.
	ListDreams(ctx context.Context, q DreamQuery) ([]Item[ma.Dream], error)
	// ClaimDreams gives owner the claim of every Active dream of any
	// workspace that is unclaimed, already owner's, or whose claim lapsed,
	// until ttl from now by the database's clock, and returns them, oldest
	// first: the dreams owner drives. Live claims of other owners are
	// left alone.
	ClaimDreams(ctx context.Context, owner string, ttl time.Duration) ([]Dream, error)
}

// Dream is a stored dream.
type Dream struct {
	ma.Dream
	// WorkspaceID is the dream's workspace; CreateDream sets it from ctx.
	WorkspaceID string
	// Active is true until the dream has ended and its session has
	// stopped (or never started): while it is, a driver claims it, and it
	// blocks other update_existing dreams on its output store.
	Active bool
	// Plan is what starting the dream creates, chosen before it creates
	// any of it, so that a start cut off by a restart is resumed.
	Plan DreamPlan
	// Owner holds the dream's claim ("" when never claimed); only
	// ClaimDreams sets it.
	Owner string
}

// UpdatesStore returns the memory store the dream writes in place, ""
// for a dream that creates a new store.
func (d *Dream) UpdatesStore() string {
	if d.OutputBehavior.Type == ma.DreamUpdateExisting {
		return d.OutputBehavior.MemoryStoreID
	}
	return ""
}

// DreamPlan is what a dream's start creates, and who asked for it.
type DreamPlan struct {
	// SessionID is the id of the session that runs the dream.
	SessionID string `json:"session_id,omitempty"`
	// StoreID is the id of the memory store a create_new dream creates.
	StoreID string `json:"store_id,omitempty"`
	// APIKeyID is the key that created the dream ("" for the bootstrap
	// key): the copy of a create_new dream's input memories records it
	// as their author.
	APIKeyID string `json:"api_key_id,omitempty"`
}

// DreamQuery adds the dreams list's filters to ListQuery.
type DreamQuery struct {
	ListQuery
	// Statuses keeps the dreams with one of these statuses (none: all).
	Statuses []string
	// CreatedGT and CreatedLT are exclusive bounds of created_at.
	CreatedGT, CreatedLT *time.Time
}

// DreamConflictError refuses a dream that would update a memory store
// another active dream updates. It matches ErrConflict.
type DreamConflictError struct {
	StoreID string
	// DreamID is the other dream.
	DreamID string
}

func (e *DreamConflictError) Error() string {
	return fmt.Sprintf("dream %s is updating memory store %s and has not fully stopped; wait until it has, or cancel it", e.DreamID, e.StoreID)
}

// Is makes a DreamConflictError match ErrConflict.
func (e *DreamConflictError) Is(target error) bool { return target == ErrConflict }
