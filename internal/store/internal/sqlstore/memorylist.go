package sqlstore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// ListMemories implements store.MemoryStores. It reads the paths below the
// prefix (a store holds at most ma.MaxMemoriesPerStore), rolls them up
// by depth, pages them by key and, for a full read, reads the content of
// the page's memories.
func (s *Store) ListMemories(ctx context.Context, storeID string, mq store.MemoryQuery) ([]store.MemoryItem, error) {
	if _, err := getMemoryStore(ctx, s.r, storeID, ""); err != nil {
		return nil, err
	}
	prefix := mq.Prefix
	if prefix == "" {
		prefix = "/"
	}
	var q query
	q.and("store_id = ?", storeID)
	q.and("path >= ? AND path < ?", prefix, prefix[:len(prefix)-1]+"0") // '0' follows '/'
	all, err := collect(ctx, s.r, func(r Row) (ma.Memory, error) { return scanMemoryRow(r, false) },
		`SELECT `+memoryColumns+` FROM memories`+q.clause()+` ORDER BY path`, q.args...)
	if err != nil {
		return nil, err
	}
	var page []store.MemoryItem
	for _, m := range all {
		it := store.MemoryItem{Memory: &m}
		if rel := m.Path[len(prefix):]; mq.Depth == 1 && strings.Contains(rel, "/") {
			it = store.MemoryItem{Prefix: prefix + rel[:strings.IndexByte(rel, '/')+1]}
		}
		if it.Key() <= mq.After || len(page) > 0 && page[len(page)-1].Key() == it.Key() {
			continue
		}
		if len(page) == mq.Limit {
			break
		}
		page = append(page, it)
	}
	if mq.Full {
		return s.withContent(ctx, page)
	}
	return page, nil
}

// withContent reads again, with their content, the memories of a page;
// one deleted meanwhile leaves it.
func (s *Store) withContent(ctx context.Context, page []store.MemoryItem) ([]store.MemoryItem, error) {
	var idList []string
	for _, it := range page {
		if it.Memory != nil {
			idList = append(idList, it.Memory.ID)
		}
	}
	if len(idList) == 0 {
		return page, nil
	}
	var q query
	q.in("id", idList)
	full, err := collect(ctx, s.r, func(r Row) (ma.Memory, error) { return scanMemoryRow(r, true) },
		`SELECT `+memoryColumns+`, content FROM memories`+q.clause(), q.args...)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]ma.Memory, len(full))
	for _, m := range full {
		byID[m.ID] = m
	}
	out := page[:0]
	for _, it := range page {
		if it.Memory != nil {
			m, ok := byID[it.Memory.ID]
			if !ok {
				continue
			}
			it.Memory = &m
		}
		out = append(out, it)
	}
	return out, nil
}

// versionColumns are the columns scanVersionRow reads, content last.
const versionColumns = `id, store_id, memory_id, operation, content_sha256, size, path, created_by, redacted_at, redacted_by, created_at`

// scanVersionRow scans versionColumns (after dest) and the content when
// full.
func scanVersionRow(row Row, full bool, dest ...any) (ma.MemoryVersion, error) {
	v := ma.MemoryVersion{Type: "memory_version"}
	var createdBy, redactedBy *string
	var redactedAt *int64
	var created int64
	var content []byte
	dest = append(dest, &v.ID, &v.MemoryStoreID, &v.MemoryID, &v.Operation, &v.ContentSHA256, &v.ContentSizeBytes, &v.Path,
		&createdBy, &redactedAt, &redactedBy, &created)
	if full {
		dest = append(dest, &content)
	}
	if err := row.Scan(dest...); err != nil {
		return v, err
	}
	v.CreatedAt = ma.Time(time.Unix(0, created))
	if redactedAt != nil {
		ts := ma.Time(time.Unix(0, *redactedAt))
		v.RedactedAt = &ts
	}
	var err error
	if v.CreatedBy, err = actorOf(createdBy); err != nil {
		return v, err
	}
	if v.RedactedBy, err = actorOf(redactedBy); err != nil {
		return v, err
	}
	if full && content != nil {
		c := string(content)
		v.Content = &c
	}
	return v, nil
}

// actorOf decodes an actor column (NULL: not recorded).
func actorOf(s *string) (*ma.Actor, error) {
	if s == nil {
		return nil, nil
	}
	var a ma.Actor
	return &a, json.Unmarshal([]byte(*s), &a)
}

// getMemoryVersion reads a version of a store of ctx's workspace.
func getMemoryVersion(ctx context.Context, db Querier, storeID, id string) (ma.MemoryVersion, error) {
	cond, args := inParentWorkspace(ctx, "store_id", "memory_stores")
	v, err := scanVersionRow(db.QueryRow(ctx, `SELECT `+versionColumns+`, content FROM memory_versions WHERE id = ? AND store_id = ?`+cond,
		append([]any{id, storeID}, args...)...), true)
	return v, notFound(err, "memory version "+id+" in memory store", storeID)
}

// GetMemoryVersion implements store.MemoryStores.
func (s *Store) GetMemoryVersion(ctx context.Context, storeID, id string) (ma.MemoryVersion, error) {
	return getMemoryVersion(ctx, s.r, storeID, id)
}

// ListMemoryVersions implements store.MemoryStores.
func (s *Store) ListMemoryVersions(ctx context.Context, storeID string, vq store.MemoryVersionQuery) ([]store.Item[ma.MemoryVersion], error) {
	if _, err := getMemoryStore(ctx, s.r, storeID, ""); err != nil {
		return nil, err
	}
	var q query
	q.and("store_id = ?", storeID)
	for col, v := range map[string]string{"memory_id": vq.MemoryID, "operation": vq.Operation, "session_id": vq.SessionID,
		"api_key_id": vq.APIKeyID, "service_account_id": vq.ServiceAccountID} {
		if v != "" {
			q.and(col+" = ?", v)
		}
	}
	q.since("created_at", nil, vq.CreatedGTE, nil, vq.CreatedLTE)
	cols := versionColumns
	if vq.Full {
		cols += ", content"
	}
	scan := func(r Row) (store.Item[ma.MemoryVersion], error) {
		var it store.Item[ma.MemoryVersion]
		var err error
		it.Value, err = scanVersionRow(r, vq.Full, &it.Pos)
		return it, err
	}
	return list(ctx, s.r, scan, `SELECT pos, `+cols+` FROM memory_versions`, "pos", &q, vq.ListQuery)
}

// RedactMemoryVersion implements store.MemoryStores.
func (s *Store) RedactMemoryVersion(ctx context.Context, storeID, id string, by *ma.Actor, at time.Time) (ma.MemoryVersion, error) {
	var out ma.MemoryVersion
	err := s.withAudit(ctx, func(tx Querier) error {
		if _, err := getMemoryStore(ctx, tx, storeID, s.lock(LockShare)); err != nil {
			return err
		}
		if _, err := getMemoryVersion(ctx, tx, storeID, id); err != nil {
			return err
		}
		var actor any
		if by != nil {
			b, err := json.Marshal(by)
			if err != nil {
				return err
			}
			actor = string(b)
		}
		_, err := tx.Exec(ctx, `UPDATE memory_versions SET content = NULL, content_sha256 = NULL, size = NULL, path = NULL, redacted_at = ?, redacted_by = ?
			WHERE id = ? AND redacted_at IS NULL`, at.UnixNano(), actor, id)
		if err != nil {
			return err
		}
		out, err = getMemoryVersion(ctx, tx, storeID, id)
		return err
	})
	return out, err
}

// PruneMemoryVersions implements store.MemoryStores.
func (s *Store) PruneMemoryVersions(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.exec(ctx, `DELETE FROM memory_versions WHERE pos IN (
		SELECT v.pos FROM memory_versions v
		WHERE v.created_at < ? AND v.pos < (SELECT MAX(w.pos) FROM memory_versions w WHERE w.memory_id = v.memory_id)
		ORDER BY v.pos LIMIT ?)`, before.UnixNano(), limit)
}
