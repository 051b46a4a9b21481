package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// CreateMemoryStore implements store.MemoryStores.
func (s *Store) CreateMemoryStore(ctx context.Context, m ma.MemoryStore) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.withAudit(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO memory_stores (id, created_at, archived, body, workspace_id) VALUES (?, ?, ?, ?, ?)`,
			m.ID, unixOf(m.CreatedAt), m.ArchivedAt != nil, body, workspaceOf(ctx))
		if err != nil {
			return s.conflict(err, "memory store "+m.ID)
		}
		return s.emitWebhooks(ctx, tx, workspaceOf(ctx), m.ID, "memory_store.created")
	})
}

// getMemoryStore reads a memory store of ctx's workspace; lock ends the
// query.
func getMemoryStore(ctx context.Context, db Querier, id, lock string) (ma.MemoryStore, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	m, err := scanJSON[ma.MemoryStore](db.QueryRow(ctx, `SELECT body FROM memory_stores WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return m, notFound(err, "memory store", id)
}

// GetMemoryStore implements store.MemoryStores.
func (s *Store) GetMemoryStore(ctx context.Context, id string) (ma.MemoryStore, error) {
	return getMemoryStore(ctx, s.r, id, "")
}

func putMemoryStore(ctx context.Context, tx Querier, m ma.MemoryStore) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE memory_stores SET archived = ?, body = ? WHERE id = ?`, m.ArchivedAt != nil, body, m.ID)
	return err
}

// UpdateMemoryStore implements store.MemoryStores.
func (s *Store) UpdateMemoryStore(ctx context.Context, id string, fn func(*ma.MemoryStore) error) (ma.MemoryStore, error) {
	var out ma.MemoryStore
	err := s.withAudit(ctx, func(tx Querier) error {
		m, err := getMemoryStore(ctx, tx, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		was := m.ArchivedAt
		if err := fn(&m); err != nil {
			return err
		}
		if err := s.emitChange(ctx, tx, "memory_stores", "memory_store", id, was, m.ArchivedAt, false); err != nil {
			return err
		}
		m.ID = id
		out = m
		return putMemoryStore(ctx, tx, m)
	})
	return out, err
}

// ArchiveMemoryStore implements store.MemoryStores.
func (s *Store) ArchiveMemoryStore(ctx context.Context, id string, at time.Time) (ma.MemoryStore, error) {
	return s.UpdateMemoryStore(ctx, id, func(m *ma.MemoryStore) error {
		if m.ArchivedAt == nil {
			ts := ma.Time(at)
			m.ArchivedAt, m.UpdatedAt = &ts, ts
		}
		return nil
	})
}

// ListMemoryStores implements store.MemoryStores.
func (s *Store) ListMemoryStores(ctx context.Context, l store.ListQuery) ([]store.Item[ma.MemoryStore], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	q.since("created_at", nil, l.CreatedGTE, nil, l.CreatedLTE)
	return list(ctx, s.r, scanItem[ma.MemoryStore], `SELECT pos, body FROM memory_stores`, "pos", &q, l)
}

// DeleteMemoryStore implements store.MemoryStores.
func (s *Store) DeleteMemoryStore(ctx context.Context, id string) error {
	return s.withAudit(ctx, func(tx Querier) error {
		if _, err := getMemoryStore(ctx, tx, id, s.lock(LockUpdate)); err != nil {
			return err
		}
		for _, stmt := range []string{
			`DELETE FROM memory_versions WHERE store_id = ?`,
			`DELETE FROM memories WHERE store_id = ?`,
		} {
			if _, err := tx.Exec(ctx, stmt, id); err != nil {
				return err
			}
		}
		return s.deleteEmitting(ctx, tx, "memory_stores", "memory_store", id)
	})
}

// memoryColumns are the columns scanMemoryRow reads, content last (read
// only by full reads).
const memoryColumns = `id, store_id, path, content_sha256, size, version_id, created_at, updated_at`

// scanMemoryRow scans memoryColumns, and the content when full.
func scanMemoryRow(row Row, full bool) (ma.Memory, error) {
	m := ma.Memory{Type: "memory"}
	var created, updated int64
	dest := []any{&m.ID, &m.MemoryStoreID, &m.Path, &m.ContentSHA256, &m.ContentSizeBytes, &m.MemoryVersionID, &created, &updated}
	var content []byte
	if full {
		dest = append(dest, &content)
	}
	if err := row.Scan(dest...); err != nil {
		return m, err
	}
	m.CreatedAt, m.UpdatedAt = ma.Time(time.Unix(0, created)), ma.Time(time.Unix(0, updated))
	if full {
		c := string(content)
		m.Content = &c
	}
	return m, nil
}

// getMemory reads a memory of a store of ctx's workspace, with its
// content.
func getMemory(ctx context.Context, db Querier, storeID, id string) (ma.Memory, error) {
	cond, args := inParentWorkspace(ctx, "store_id", "memory_stores")
	m, err := scanMemoryRow(db.QueryRow(ctx, `SELECT `+memoryColumns+`, content FROM memories WHERE id = ? AND store_id = ?`+cond,
		append([]any{id, storeID}, args...)...), true)
	return m, notFound(err, "memory "+id+" in memory store", storeID)
}

// GetMemory implements store.MemoryStores.
func (s *Store) GetMemory(ctx context.Context, storeID, id string) (ma.Memory, error) {
	return getMemory(ctx, s.r, storeID, id)
}

// memoryWriteTx runs fn in a write transaction on w's memory store, whose
// row it locks: the writes of one store's memories are serialized. A
// write other than a delete is refused on an archived store.
func (s *Store) memoryWriteTx(ctx context.Context, w store.MemoryWrite, del bool, fn func(tx Querier) error) error {
	return s.withAudit(ctx, func(tx Querier) error {
		m, err := getMemoryStore(ctx, tx, w.StoreID, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		if m.ArchivedAt != nil && !del {
			return fmt.Errorf("memory store %s is archived and its memories read-only: %w", m.ID, store.ErrArchived)
		}
		return fn(tx)
	})
}

// CreateMemory implements store.MemoryStores.
func (s *Store) CreateMemory(ctx context.Context, w store.MemoryWrite) (ma.Memory, error) {
	if w.Path == nil || w.Content == nil {
		return ma.Memory{}, errors.New("sqlstore: CreateMemory needs a path and a content")
	}
	m := ma.Memory{ID: w.MemoryID, Type: "memory", MemoryStoreID: w.StoreID, Path: *w.Path, Content: w.Content,
		MemoryVersionID: w.VersionID, CreatedAt: ma.Time(w.At), UpdatedAt: ma.Time(w.At)}
	m.ContentSHA256, m.ContentSizeBytes = digest(*w.Content)
	err := s.memoryWriteTx(ctx, w, false, func(tx Querier) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM memories WHERE store_id = ?`, w.StoreID).Scan(&n); err != nil {
			return err
		}
		if n >= ma.MaxMemoriesPerStore {
			return fmt.Errorf("memory store %s holds %d memories, the most a store holds: %w", w.StoreID, n, store.ErrLimit)
		}
		if err := pathConflict(ctx, tx, w.StoreID, "", m.Path); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO memories (id, store_id, path, content, content_sha256, size, version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.MemoryStoreID, m.Path, []byte(*w.Content), m.ContentSHA256, m.ContentSizeBytes, m.MemoryVersionID, w.At.UnixNano(), w.At.UnixNano())
		if err != nil {
			return s.conflict(err, "memory "+m.ID)
		}
		return addVersion(ctx, tx, w, m, ma.MemoryCreated)
	})
	return m, err
}

// UpdateMemory implements store.MemoryStores.
func (s *Store) UpdateMemory(ctx context.Context, w store.MemoryWrite) (ma.Memory, error) {
	var out ma.Memory
	err := s.memoryWriteTx(ctx, w, false, func(tx Querier) error {
		cur, err := getMemory(ctx, tx, w.StoreID, w.MemoryID)
		if err != nil {
			return err
		}
		out = cur
		next := cur
		if w.Path != nil {
			next.Path = *w.Path
		}
		if w.Content != nil {
			next.Content = w.Content
			next.ContentSHA256, next.ContentSizeBytes = digest(*w.Content)
		}
		if next.Path == cur.Path && *next.Content == *cur.Content {
			return nil // a no-op: no version, whatever the precondition
		}
		if w.IfSHA256 != "" && w.IfSHA256 != cur.ContentSHA256 {
			return fmt.Errorf("memory %s has content_sha256 %s, not %s: %w", cur.ID, cur.ContentSHA256, w.IfSHA256, store.ErrPrecondition)
		}
		if next.Path != cur.Path {
			if err := pathConflict(ctx, tx, w.StoreID, cur.ID, next.Path); err != nil {
				return err
			}
		}
		next.MemoryVersionID, next.UpdatedAt = w.VersionID, ma.Time(w.At)
		_, err = tx.Exec(ctx, `UPDATE memories SET path = ?, content = ?, content_sha256 = ?, size = ?, version_id = ?, updated_at = ? WHERE id = ?`,
			next.Path, []byte(*next.Content), next.ContentSHA256, next.ContentSizeBytes, next.MemoryVersionID, w.At.UnixNano(), cur.ID)
		if err != nil {
			return s.conflict(err, "memory path "+next.Path)
		}
		out = next
		return addVersion(ctx, tx, w, next, ma.MemoryModified)
	})
	return out, err
}

// DeleteMemory implements store.MemoryStores.
func (s *Store) DeleteMemory(ctx context.Context, w store.MemoryWrite) error {
	return s.memoryWriteTx(ctx, w, true, func(tx Querier) error {
		cur, err := getMemory(ctx, tx, w.StoreID, w.MemoryID)
		if err != nil {
			return err
		}
		if w.IfSHA256 != "" && w.IfSHA256 != cur.ContentSHA256 {
			return fmt.Errorf("memory %s has content_sha256 %s, not %s: %w", cur.ID, cur.ContentSHA256, w.IfSHA256, store.ErrPrecondition)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memories WHERE id = ?`, cur.ID); err != nil {
			return err
		}
		return addVersion(ctx, tx, w, cur, ma.MemoryDeleted)
	})
}

// digest is the content_sha256 and content_size_bytes of content.
func digest(content string) (string, int64) {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:]), int64(len(content))
}

// ancestors returns the proper ancestor directories of a memory path, as
// paths ("/a/b/c" → "/a", "/a/b").
func ancestors(path string) []string {
	var out []string
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			out = append(out, path[:i])
		}
	}
	return out
}

// pathConflict returns a *store.PathConflictError if a memory of the store
// other than self has path, an ancestor directory of it, or a path below
// it.
func pathConflict(ctx context.Context, tx Querier, storeID, self, path string) error {
	var q query
	q.and("store_id = ?", storeID)
	q.and("id <> ?", self)
	cond := "path = ? OR (path >= ? AND path < ?)"
	args := []any{path, path + "/", path + "0"} // '0' follows '/'
	if anc := ancestors(path); len(anc) > 0 {
		cond += " OR path IN (?" + strings.Repeat(", ?", len(anc)-1) + ")"
		for _, a := range anc {
			args = append(args, a)
		}
	}
	q.and("("+cond+")", args...)
	var id, other string
	err := tx.QueryRow(ctx, `SELECT id, path FROM memories`+q.clause()+` ORDER BY path LIMIT 1`, q.args...).Scan(&id, &other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return &store.PathConflictError{MemoryPathConflict: ma.MemoryPathConflict{Path: path, MemoryID: id, MemoryPath: other}}
}

// addVersion records the version w.VersionID of m, after op.
func addVersion(ctx context.Context, tx Querier, w store.MemoryWrite, m ma.Memory, op string) error {
	var content, sha, size any // NULL for a deletion
	if op != ma.MemoryDeleted {
		content, sha, size = []byte(*m.Content), m.ContentSHA256, m.ContentSizeBytes
	}
	var by any
	var a ma.Actor
	if w.Actor != nil {
		a = *w.Actor
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		by = string(b)
	}
	_, err := tx.Exec(ctx, `INSERT INTO memory_versions (id, store_id, memory_id, operation, content, content_sha256, size, path, created_by, session_id, api_key_id, service_account_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.VersionID, m.MemoryStoreID, m.ID, op, content, sha, size, m.Path, by, a.SessionID, a.APIKeyID, a.ServiceAccountID, w.At.UnixNano())
	return err
}
