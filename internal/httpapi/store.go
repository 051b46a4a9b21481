package httpapi

import (
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
)

// Store is what the API needs of the store: the union of what each part
// reads and writes, each declared beside the code that calls it (the
// handlers of a resource, the idempotency keeper, the tails of streams,
// the large reads, readiness). A store.Store is one. It also serves the
// sessions service New makes when Config.Sessions is nil; the vault
// endpoints take theirs from VaultConfig.Store.
type Store interface {
	agentStore
	apiKeyStore
	environmentStore
	environmentKeyStore
	environmentReader
	eventStore
	machineStore
	workStore
	toolCallStore
	sessionStore
	threadStore
	resourceStore
	tailStore
	logReader
	outcomeStore
	writeChecker
	WorkspaceStore
	memoryStoreRows
	dreamRows
	deploymentRows
	store.Files
	store.Skills
	sessions.Store
}
