package store

import "context"

// RepositoryTokens stores the sealed authorization tokens of sessions'
// github_repository resources, apart from the session object.
type RepositoryTokens interface {
	// SetRepositoryToken records (or replaces) the sealed token of a
	// resource; nil sealed removes it.
	SetRepositoryToken(ctx context.Context, sessionID, resourceID string, sealed []byte) error
	// RepositoryTokens returns the sealed tokens of a session's
	// resources, by resource id.
	RepositoryTokens(ctx context.Context, sessionID string) (map[string][]byte, error)
}
