package managedagents

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

// SessionResource is a resource of a session: a file of the Files API
// placed in its workspace.
type SessionResource struct {
	ID        string `json:"id"`
	Type      string `json:"type"` // "file"
	FileID    string `json:"file_id,omitempty"`
	MountPath string `json:"mount_path"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}
