package store

import (
	"context"
	"time"
)

// Replicas is what the replicas of one database tell each other beyond
// session leases: which of them has executors of which self-hosted
// environments connected (so that a session moves to the replica its
// hands are on), and which workspace a cloud session last used (so that a
// session that moved to a replica without that workspace is told it was
// reset).
type Replicas interface {
	// AnnounceHands replaces what replica announced: it has executors of
	// the environments envIDs connected, until ttl from now by the
	// database's clock. An empty envIDs withdraws the announcement.
	AnnounceHands(ctx context.Context, replica string, envIDs []string, ttl time.Duration) error
	// ReplicasWithHands returns, sorted, the replicas whose announcement
	// of executors of the environment is live.
	ReplicasWithHands(ctx context.Context, envID string) ([]string, error)
	// WorkspaceMarker returns the marker recorded for the session's
	// workspace, "" when none was.
	WorkspaceMarker(ctx context.Context, sessionID string) (string, error)
	// SetWorkspaceMarker records the marker of the session's workspace.
	// The marker is deleted with the session.
	SetWorkspaceMarker(ctx context.Context, sessionID, marker string) error
}
