package store

import (
	"context"
	"time"
)

// Replicas is what the replicas of one database tell each other beyond
// session leases: which of them has executors of which self-hosted
// environments connected (so that a session moves to the replica its
// hands are on), which workspace a cloud session last used (so that a
// session goes back to it, or is told it was reset), and the settings they
// must agree on.
type Replicas interface {
	// AnnounceHands replaces what replica announced: it has executors of
	// the environments envIDs connected, until ttl from now by the
	// database's clock. An empty envIDs withdraws the announcement.
	AnnounceHands(ctx context.Context, replica string, envIDs []string, ttl time.Duration) error
	// ReplicasWithHands returns, sorted, the replicas whose announcement
	// of executors of the environment is live.
	ReplicasWithHands(ctx context.Context, envID string) ([]string, error)
	// Announced returns, sorted, what replica's live announcement holds.
	Announced(ctx context.Context, replica string) ([]string, error)
	// WorkspaceMarker returns the marker recorded for the session's
	// workspace, "" when none was.
	WorkspaceMarker(ctx context.Context, sessionID string) (string, error)
	// SetWorkspaceMarker records the marker of the session's workspace.
	// The marker is deleted with the session.
	SetWorkspaceMarker(ctx context.Context, sessionID, marker string) error
	// ClaimSetting records value under name unless a value is recorded
	// already, and returns the recorded value: the first claim wins, and
	// every process sharing the database reads the same value.
	ClaimSetting(ctx context.Context, name, value string) (string, error)
}
