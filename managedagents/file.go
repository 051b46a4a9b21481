package managedagents

import "encoding/json"

// File is the metadata of a file of the Files API (/v1/files).
type File struct {
	ID       string `json:"id"`
	Type     string `json:"type"` // "file"
	Filename string `json:"filename"`
	MimeType string `json:"mime_type"`
	// SizeBytes is the size of the content in bytes.
	SizeBytes int64  `json:"size_bytes"`
	CreatedAt string `json:"created_at"`
	// Downloadable: reins lets every file be downloaded, uploads
	// included (see docs/decisions.md).
	Downloadable bool `json:"downloadable"`
	// ExpiresAt is when the content stops being available (nil: never).
	ExpiresAt *string `json:"expires_at"`
	// Scope is the session a file belongs to (nil for uploads).
	Scope *FileScope `json:"scope"`
}

// FileScope is the scope of a file: the session it was created in.
type FileScope struct {
	ID   string `json:"id"`
	Type string `json:"type"` // "session"
}

// SessionResource is a resource of a session: a file of the Files API or
// a git repository, placed in its workspace, or a memory store, mounted
// under /mnt/memory.
type SessionResource struct {
	ID     string `json:"id"`
	Type   string `json:"type"` // "file", "github_repository" or "memory_store"
	FileID string `json:"file_id,omitempty"`
	URL    string `json:"url,omitempty"`
	// Checkout is the branch or commit of a github_repository (nil: the
	// remote's default branch).
	Checkout  *Checkout `json:"checkout,omitempty"`
	MountPath string    `json:"mount_path"`
	CreatedAt string    `json:"created_at"`
	UpdatedAt string    `json:"updated_at"`
	// The fields of a memory_store resource: the store, the access
	// (read_write or read_only), the store's name and description as
	// they were when the session was created, and the instructions
	// (nil: none). Its MountPath is under /mnt/memory; it has no ID.
	MemoryStoreID string  `json:"memory_store_id,omitempty"`
	Access        string  `json:"access,omitempty"`
	Name          string  `json:"name,omitempty"`
	Description   string  `json:"description,omitempty"`
	Instructions  *string `json:"instructions,omitempty"`
}

// memoryStoreResource is the wire shape of a memory_store resource.
type memoryStoreResource struct {
	Type          string  `json:"type"`
	MemoryStoreID string  `json:"memory_store_id"`
	Access        string  `json:"access"`
	Name          string  `json:"name"`
	Description   string  `json:"description"`
	Instructions  *string `json:"instructions"`
	MountPath     string  `json:"mount_path"`
}

// MarshalJSON writes a memory_store resource in its own shape (no id,
// no timestamps, description always, instructions null when none) and
// the other resources as they are.
func (r SessionResource) MarshalJSON() ([]byte, error) {
	if r.Type == "memory_store" {
		return json.Marshal(memoryStoreResource{Type: r.Type, MemoryStoreID: r.MemoryStoreID, Access: r.Access, Name: r.Name,
			Description: r.Description, Instructions: r.Instructions, MountPath: r.MountPath})
	}
	type plain SessionResource
	return json.Marshal(plain(r))
}

// Checkout is what a github_repository resource checks out.
type Checkout struct {
	Type string `json:"type"` // "branch" or "commit"
	Name string `json:"name,omitempty"`
	SHA  string `json:"sha,omitempty"`
}
