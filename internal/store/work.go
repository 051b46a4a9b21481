package store

import (
	"context"
	"time"
)

// Work stores the work queues of self-hosted environments: a work item
// means "run session S" for a pull worker.
type Work interface {
	// CreateWork stores a new item. A session has at most one open (not
	// stopped) item: a second is ErrConflict, as is a taken id.
	CreateWork(ctx context.Context, w WorkItem) error
	GetWork(ctx context.Context, environmentID, id string) (WorkItem, error)
	ListWork(ctx context.Context, environmentID string, q ListQuery) ([]Item[WorkItem], error)
	// UpdateWork changes an item in one transaction; an error from fn is
	// returned as is and nothing is written.
	UpdateWork(ctx context.Context, environmentID, id string, fn func(*WorkItem) error) (WorkItem, error)
	// ClaimWork hands the oldest queued item of the environment that no
	// worker claimed since reclaimBefore to worker, or ErrNotFound.
	ClaimWork(ctx context.Context, environmentID, worker string, now, reclaimBefore time.Time) (WorkItem, error)
	// OpenWorkForSession returns the session's latest item that is not
	// stopped, or ErrNotFound.
	OpenWorkForSession(ctx context.Context, sessionID string) (WorkItem, error)
	// SessionWorkAcked reports whether a worker ever acknowledged an item
	// of the session (the session is then served by pull workers).
	SessionWorkAcked(ctx context.Context, sessionID string) (bool, error)
	// ExpiredWork returns the starting or active items whose lease
	// expired before now.
	ExpiredWork(ctx context.Context, now time.Time) ([]WorkItem, error)
	// WorkStats counts an environment's queue.
	WorkStats(ctx context.Context, environmentID string) (WorkStats, error)
	// AllWorkStats counts the queues of every environment together.
	AllWorkStats(ctx context.Context) (WorkStats, error)
}

// Work item states.
const (
	WorkQueued   = "queued"
	WorkStarting = "starting"
	WorkActive   = "active"
	WorkStopping = "stopping"
	WorkStopped  = "stopped"
)

// WorkItem is an item of an environment's work queue.
type WorkItem struct {
	ID            string
	EnvironmentID string
	SessionID     string
	State         string
	Metadata      map[string]string
	CreatedAt     time.Time
	// ClaimedAt and ClaimedBy: the latest poll that handed out the item.
	ClaimedAt *time.Time
	ClaimedBy string
	// Lease.
	AcknowledgedAt    *time.Time
	StartedAt         *time.Time
	LastHeartbeat     string // the token the next heartbeat must echo
	LatestHeartbeatAt *time.Time
	LeaseExpiresAt    *time.Time
	TTLSeconds        int64
	StopRequestedAt   *time.Time
	StoppedAt         *time.Time
}

// WorkStats are the figures of an environment's queue.
type WorkStats struct {
	// Depth counts queued items; Pending counts those among them that a
	// worker claimed but has not acknowledged.
	Depth, Pending int64
	OldestQueuedAt *time.Time
}
