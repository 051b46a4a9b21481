package managedagents

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

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

// Limits of memory stores and their memories, and where sessions see
// them. The API checks writes with them; a session's memory directory is
// synced by the same rules (package executor/memsync).
const (
	// MaxMemoryContentBytes bounds a memory's content (UTF-8 bytes).
	MaxMemoryContentBytes = 100 << 10
	// MaxMemoryPathBytes bounds a memory's path.
	MaxMemoryPathBytes = 1024
	// MaxMemoryPathSegments bounds the segments of a memory's path.
	MaxMemoryPathSegments = 20
	// MaxMemoriesPerStore is how many memories a memory store holds at
	// most.
	MaxMemoriesPerStore = 2000
	// MemoryMountRoot is where sessions see their memory stores.
	MemoryMountRoot = "/mnt/memory"
)

// CheckMemoryPath returns why p is not a valid memory path, or nil: it
// starts with "/", has 1 to MaxMemoryPathSegments segments, none empty,
// "." or "..", no control or format characters nor line or paragraph
// separators, is NFC and at most MaxMemoryPathBytes bytes.
func CheckMemoryPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return errors.New("must start with /")
	case len(p) > MaxMemoryPathBytes:
		return fmt.Errorf("must be at most %d bytes, got %d", MaxMemoryPathBytes, len(p))
	case !utf8.ValidString(p):
		return errors.New("must be valid UTF-8")
	case !norm.NFC.IsNormalString(p):
		return errors.New("must be in Unicode normalization form C (NFC)")
	}
	for _, r := range p {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("must not contain the character %U", r)
		}
	}
	segs := strings.Split(p[1:], "/")
	if len(segs) > MaxMemoryPathSegments {
		return fmt.Errorf("must have at most %d segments, got %d", MaxMemoryPathSegments, len(segs))
	}
	for _, s := range segs {
		switch s {
		case "":
			return errors.New("must not have an empty segment (a doubled or trailing /)")
		case ".", "..":
			return fmt.Errorf("must not have a %q segment", s)
		}
	}
	return nil
}

// CheckMemoryContent returns why c is not a valid memory content, or nil.
func CheckMemoryContent(c string) error {
	if len(c) > MaxMemoryContentBytes {
		return fmt.Errorf("must be at most %d bytes (100 kB), got %d", MaxMemoryContentBytes, len(c))
	}
	if !utf8.ValidString(c) {
		return errors.New("must be valid UTF-8")
	}
	return nil
}

// MemoryPathConflict is the error of a memory write whose path is taken,
// or overlaps another memory's (one is an ancestor directory of the
// other).
type MemoryPathConflict struct {
	Path string
	// MemoryID and MemoryPath name the memory in the way.
	MemoryID, MemoryPath string
}

func (e *MemoryPathConflict) Error() string {
	if e.MemoryPath == e.Path {
		return fmt.Sprintf("memory path %s is taken by memory %s", e.Path, e.MemoryID)
	}
	return fmt.Sprintf("memory path %s overlaps the path %s of memory %s", e.Path, e.MemoryPath, e.MemoryID)
}
