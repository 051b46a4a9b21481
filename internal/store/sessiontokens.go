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
// no token of a deleted session. It also reports what else ends a token:
// the session archived, the environment key that polled it revoked, its
// environment archived.
type SessionTokens interface {
	// CreateSessionToken stores a token (its hash); a taken hash is
	// ErrConflict.
	CreateSessionToken(ctx context.Context, t SessionToken) error
	// SessionTokenByHash returns the token with that hash, with its
	// session's workspace and whether the session is archived, the key
	// revoked, the environment archived; ErrNotFound when no such token
	// exists or its session is gone.
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
	// EnvironmentKeyID is the environment key whose poll handed the
	// token out ("" when another credential polled).
	EnvironmentKeyID string
	CreatedAt        time.Time
	// Set by SessionTokenByHash (ignored on create): the session's
	// workspace and whether it is archived; whether EnvironmentKeyID
	// names a key that is revoked or gone; whether the environment is
	// archived or gone.
	WorkspaceID         string
	SessionArchived     bool
	KeyRevoked          bool
	EnvironmentArchived bool
}
