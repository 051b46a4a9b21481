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

// SessionResource is a resource of a session: a file of the Files API or
// a git repository, placed in its workspace.
type SessionResource struct {
	ID     string `json:"id"`
	Type   string `json:"type"` // "file" or "github_repository"
	FileID string `json:"file_id,omitempty"`
	URL    string `json:"url,omitempty"`
	// Checkout is the branch or commit of a github_repository (nil: the
	// remote's default branch).
	Checkout  *Checkout `json:"checkout,omitempty"`
	MountPath string    `json:"mount_path"`
	CreatedAt string    `json:"created_at"`
	UpdatedAt string    `json:"updated_at"`
}

// Checkout is what a github_repository resource checks out.
type Checkout struct {
	Type string `json:"type"` // "branch" or "commit"
	Name string `json:"name,omitempty"`
	SHA  string `json:"sha,omitempty"`
}
