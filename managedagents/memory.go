package managedagents

// MemoryStore is a store of memories that sessions mount as a directory
// (memory_store resources).
type MemoryStore struct {
	ID          string   `json:"id"`
	Type        string   `json:"type"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Metadata    Metadata `json:"metadata"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
	ArchivedAt  *string  `json:"archived_at"`
}

// Memory is one file of a memory store. Content is null in the basic view.
type Memory struct {
	ID               string  `json:"id"`
	Type             string  `json:"type"`
	MemoryStoreID    string  `json:"memory_store_id"`
	Path             string  `json:"path"`
	Content          *string `json:"content"`
	ContentSHA256    string  `json:"content_sha256"`
	ContentSizeBytes int64   `json:"content_size_bytes"`
	MemoryVersionID  string  `json:"memory_version_id"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
}

// MemoryPrefix is a list item standing for the memories below Path (which
// ends with "/") that a list with depth rolls up.
type MemoryPrefix struct {
	Type string `json:"type"`
	Path string `json:"path"`
}

// Memory version operations.
const (
	MemoryCreated  = "created"
	MemoryModified = "modified"
	MemoryDeleted  = "deleted"
)

// MemoryVersion records one change of a memory. Content, ContentSHA256,
// ContentSizeBytes and Path are null once redacted; the first three for a
// deletion too.
type MemoryVersion struct {
	ID               string  `json:"id"`
	Type             string  `json:"type"`
	MemoryID         string  `json:"memory_id"`
	MemoryStoreID    string  `json:"memory_store_id"`
	Operation        string  `json:"operation"`
	Content          *string `json:"content"`
	ContentSHA256    *string `json:"content_sha256"`
	ContentSizeBytes *int64  `json:"content_size_bytes"`
	Path             *string `json:"path"`
	CreatedBy        *Actor  `json:"created_by"`
	RedactedAt       *string `json:"redacted_at"`
	RedactedBy       *Actor  `json:"redacted_by"`
	CreatedAt        string  `json:"created_at"`
}

// Actor types of memory versions.
const (
	ActorSession        = "session_actor"
	ActorAPI            = "api_actor"
	ActorUser           = "user_actor"
	ActorServiceAccount = "service_account_actor"
)

// Actor is who made a change: one id field, the one its Type names.
type Actor struct {
	Type             string `json:"type"`
	SessionID        string `json:"session_id,omitempty"`
	APIKeyID         string `json:"api_key_id,omitempty"`
	UserID           string `json:"user_id,omitempty"`
	ServiceAccountID string `json:"service_account_id,omitempty"`
}
