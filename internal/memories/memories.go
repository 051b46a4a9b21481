// Package memories holds the server's rules of memory stores that do not
// need the database: what a list's path prefix may be and the directory
// name a store is mounted at. What a memory path may be, how large a
// memory may grow and where stores are mounted are the public rules of
// package managedagents, which a session's memory sync obeys too. The
// HTTP API checks writes with them; the store keeps the rules that need a
// transaction (paths unique and not overlapping, the count per store,
// preconditions). Its Pruner deletes the versions past their retention,
// through the store, and SyncStore lets sessions' memory directories sync
// with it (package executor/memsync).
package memories

import (
	"errors"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// CheckPrefix returns why p is not a valid path_prefix of a memory list:
// "/" or a valid path followed by "/".
func CheckPrefix(p string) error {
	if !strings.HasSuffix(p, "/") {
		return errors.New("must end with /")
	}
	if p == "/" {
		return nil
	}
	return ma.CheckMemoryPath(strings.TrimSuffix(p, "/"))
}

// Slug is the directory name of a store named name: lowercased, each run
// of characters other than a-z and 0-9 made one "-", without a leading or
// trailing "-" ("Demo Memory" → "demo-memory"); "memory" when nothing is
// left.
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "memory"
	}
	return b.String()
}
