package store

import (
	"context"
	"io"

	ma "github.com/reinsdev/reins/managedagents"
)

// FileChunk is the size of the pieces a file's content is stored in: a
// download reads one piece at a time, never the whole file.
const FileChunk = 1 << 20

// Files stores the files of the Files API: their metadata and their
// content, in pieces of at most FileChunk bytes.
type Files interface {
	// CreateFile stores f and its content, read from content to EOF, in
	// one transaction. The caller has counted and hashed the content
	// (f.SizeBytes, f.SHA256); a content of another size is an error and
	// nothing is stored.
	CreateFile(ctx context.Context, f File, content io.Reader) error
	// GetFile returns a file's metadata.
	GetFile(ctx context.Context, id string) (File, error)
	// ListFiles lists files, filtered by scope and ids.
	ListFiles(ctx context.Context, q FileQuery) ([]Item[File], error)
	// DeleteFile removes a file and its content.
	DeleteFile(ctx context.Context, id string) error
	// ReadFileChunk returns piece n (from 0) of a file's content;
	// ErrNotFound past its end.
	ReadFileChunk(ctx context.Context, id string, n int) ([]byte, error)
}

// File is a stored file: its API object and the SHA-256 of its content
// (hex), checked as it is read back.
type File struct {
	ma.File
	SHA256 string
	// WorkspaceID is the file's workspace; the store sets it from the
	// context it is created with (WithWorkspace), or, without one, from
	// the session of its scope.
	WorkspaceID string
}

// FileQuery adds the files list's filters to ListQuery.
type FileQuery struct {
	ListQuery
	// ScopeID keeps the files of one scope (a session id).
	ScopeID string
	// IDs keeps the files with these ids (none: no filter).
	IDs []string
}
