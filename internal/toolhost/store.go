package toolhost

import (
	"context"
	"time"

	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// The tool host's parts each declare the few store methods they use; the
// whole store.Store is the app's to hold.

// environmentGetter reads an environment.
type environmentGetter interface {
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
}

// sessionGetter reads a session.
type sessionGetter interface {
	GetSession(ctx context.Context, id string) (ma.Session, error)
}

// credentialLister is what liveCredentials needs of the store.
type credentialLister interface {
	ListCredentials(ctx context.Context, vaultID string, q store.ListQuery) ([]store.Item[store.Credential], error)
}

// machineLister lists the machines (agent ends' scopes).
type machineLister interface {
	ListMachines(ctx context.Context) ([]store.Machine, error)
}

// skillReader reads skill versions and their content.
type skillReader interface {
	GetSkillVersion(ctx context.Context, skillID, version string) (store.SkillVersion, error)
	ReadSkillChunk(ctx context.Context, skillID, version string, n int) ([]byte, error)
}

// handsStore is what replicaHands needs of the store: the replicas'
// announcements and the hand-over of a session's lease.
type handsStore interface {
	machineLister
	AnnounceHands(ctx context.Context, replica string, envIDs []string, ttl time.Duration) error
	ReplicasWithHands(ctx context.Context, envID string) ([]string, error)
	HandOverSession(ctx context.Context, sessionID, owner string, token int64, to string, ttl time.Duration) error
}

// sandboxStore is what the sandboxes read: the environment's network
// policy and, for its MCP servers' hosts, the session.
type sandboxStore interface {
	environmentGetter
	sessionGetter
}

// Store is what a Host needs of the store: environments and sessions to
// place, vault credentials and repository tokens to inject, files and
// skills to place, workspace markers, the replicas' announcements, and
// the Files its outputs become.
type Store interface {
	sandboxStore
	credentialLister
	skillReader
	handsStore
	store.Files
	memories.Memories
	CreateSessionToken(ctx context.Context, t store.SessionToken) error
	RepositoryTokens(ctx context.Context, sessionID string) (map[string][]byte, error)
	WorkspaceMarker(ctx context.Context, sessionID string) (string, error)
	SetWorkspaceMarker(ctx context.Context, sessionID, marker string) error
}
