package sessions

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// WorkspaceMount is the absolute path of the workspace in mount paths.
const WorkspaceMount = "/workspace"

// MountPath turns a resource's mount path into the path relative to the
// workspace root, refusing one that leaves the workspace. A relative path
// is taken from the workspace root.
func MountPath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("contains a NUL byte")
	}
	abs := p
	if !strings.HasPrefix(p, "/") {
		abs = WorkspaceMount + "/" + p
	}
	clean := path.Clean(abs)
	rel, ok := strings.CutPrefix(clean, WorkspaceMount+"/")
	if !ok || rel == "" || strings.HasPrefix(rel, "../") || rel == ".." {
		return "", fmt.Errorf("%q is outside the session's workspace (%s)", p, WorkspaceMount)
	}
	if rel == ".reins" || strings.HasPrefix(rel, ".reins/") {
		return "", fmt.Errorf("%q is reserved", p)
	}
	return rel, nil
}

// RepositoryTokenAD is the associated data a repository token is sealed
// with: it binds the sealed token to its session and resource.
func RepositoryTokenAD(sessionID, resourceID string) string { return sessionID + "/" + resourceID }
