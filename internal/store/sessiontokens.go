package store

import (
	"context"
	"time"
)

// SessionTokens stores the sessions tokens the work queue issues to pull
// workers, one per hand-out of a work item, by hash only. A token is the
// credential of its session's work: the session, its events, its work
// item and the memory stores attached to it. It lives as long as the
// session: its row goes with the session, and SessionTokenByHash finds
// no token of a deleted session.
type SessionTokens interface {
	// CreateSessionToken stores a token (its hash); a taken hash is
	// ErrConflict.
	CreateSessionToken(ctx context.Context, t SessionToken) error
	// SessionTokenByHash returns the token with that hash, with its
	// session's workspace and whether the session is archived;
	// ErrNotFound when no such token exists or its session is gone.
	SessionTokenByHash(ctx context.Context, hash string) (SessionToken, error)
}

// SessionToken is a stored sessions token (its hash only).
type SessionToken struct {
	Hash string
	// SessionID, WorkID and EnvironmentID name the session, the work
	// item it was issued with, and that item's environment.
	SessionID     string
	WorkID        string
	EnvironmentID string
	CreatedAt     time.Time
	// WorkspaceID and SessionArchived describe the session as
	// SessionTokenByHash reads it (unset on create).
	WorkspaceID     string
	SessionArchived bool
}
