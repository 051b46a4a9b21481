package httpapi

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/reinsdev/reins"

// forbiddenDep reports whether the API server must not link path: the
// executor protocol, the tools' implementation, pseudo-terminals, Landlock.
func forbiddenDep(path string) bool {
	switch path {
	case module + "/executor", module + "/tools":
		return true
	}
	return strings.HasPrefix(path, "github.com/creack/pty") || strings.HasPrefix(path, "github.com/landlock-lsm/")
}

// TestDependencies walks the imports of httpapi within the module (the
// check of `go list -deps ./httpapi`, without running go).
func TestDependencies(t *testing.T) {
	seen := map[string]bool{}
	var walk func(path, from string)
	walk = func(path, from string) {
		if forbiddenDep(path) {
			t.Errorf("httpapi depends on %s (imported by %s)", path, from)
		}
		if seen[path] || !strings.HasPrefix(path, module+"/") {
			return
		}
		seen[path] = true
		p, err := build.ImportDir(filepath.Join("../..", strings.TrimPrefix(path, module+"/")), 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range p.Imports {
			walk(imp, path)
		}
	}
	walk(module+"/internal/httpapi", "")
}
