package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/reinsdev/reins/internal/store"
)

// CreateFile implements store.Files.
func (s *Store) CreateFile(ctx context.Context, f store.File, content io.Reader) error {
	body, err := json.Marshal(f.File)
	if err != nil {
		return err
	}
	scope := ""
	if f.Scope != nil {
		scope = f.Scope.ID
	}
	return s.d.WithTx(ctx, func(tx Querier) error {
		if err := putChunks(ctx, tx, f.ID, content, f.SizeBytes); err != nil {
			return fmt.Errorf("file %s: %w", f.ID, err)
		}
		ws, err := fileWorkspace(ctx, tx, scope)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO files (id, scope_id, created_at, sha256, body, workspace_id) VALUES (?, ?, ?, ?, ?, ?)`,
			f.ID, scope, unixOf(f.CreatedAt), f.SHA256, body, ws)
		return s.conflict(err, "file "+f.ID)
	})
}

// fileWorkspace is the workspace of a file created with ctx in scope (a
// session id, or ""): ctx's, else the session's (an output the server
// stores for a session belongs to the session's workspace), else the
// default.
func fileWorkspace(ctx context.Context, tx Querier, scope string) (string, error) {
	if _, ok := store.WorkspaceFrom(ctx); ok || scope == "" {
		return workspaceOf(ctx), nil
	}
	var ws string
	err := tx.QueryRow(ctx, `SELECT workspace_id FROM sessions WHERE id = ?`, scope).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return store.DefaultWorkspace, nil
	}
	return ws, err
}

const fileCols = `pos, sha256, body, workspace_id`

func scanFile(row Row) (store.Item[store.File], error) {
	var it store.Item[store.File]
	var body []byte
	if err := row.Scan(&it.Pos, &it.Value.SHA256, &body, &it.Value.WorkspaceID); err != nil {
		return it, err
	}
	err := json.Unmarshal(body, &it.Value.File)
	return it, err
}

// GetFile implements store.Files.
func (s *Store) GetFile(ctx context.Context, id string) (store.File, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	it, err := scanFile(s.r.QueryRow(ctx, `SELECT `+fileCols+` FROM files WHERE id = ?`+cond, append([]any{id}, args...)...))
	return it.Value, notFound(err, "file", id)
}

// ListFiles implements store.Files.
func (s *Store) ListFiles(ctx context.Context, l store.FileQuery) ([]store.Item[store.File], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if l.ScopeID != "" {
		q.and("scope_id = ?", l.ScopeID)
	}
	if len(l.IDs) > 0 {
		q.in("id", l.IDs)
	}
	q.since("created_at", nil, l.CreatedGTE, nil, l.CreatedLTE)
	return list(ctx, s.r, scanFile, `SELECT `+fileCols+` FROM files`, "pos", &q, l.ListQuery)
}

// DeleteFile implements store.Files.
func (s *Store) DeleteFile(ctx context.Context, id string) error {
	return s.d.WithTx(ctx, func(tx Querier) error {
		cond, args := inWorkspace(ctx, "workspace_id")
		n, err := tx.Exec(ctx, `DELETE FROM files WHERE id = ?`+cond, append([]any{id}, args...)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("file %s: %w", id, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, `DELETE FROM file_chunks WHERE file_id = ?`, id)
		return err
	})
}

// ReadFileChunk implements store.Files.
func (s *Store) ReadFileChunk(ctx context.Context, id string, n int) ([]byte, error) {
	cond, args := inParentWorkspace(ctx, "file_id", "files")
	data, err := s.readChunk(ctx, id, n, cond, args)
	return data, notFound(err, fmt.Sprintf("piece %d of file", n), id)
}

// putChunks stores content, read to EOF, in file_chunks under key, in
// pieces of store.FileChunk bytes; a content of another size than size is
// an error.
func putChunks(ctx context.Context, tx Querier, key string, content io.Reader, size int64) error {
	var got int64
	buf := make([]byte, store.FileChunk)
	for n := 0; ; n++ {
		k, err := io.ReadFull(content, buf)
		if k > 0 {
			got += int64(k)
			if _, err := tx.Exec(ctx, `INSERT INTO file_chunks (file_id, n, data) VALUES (?, ?, ?)`, key, n, buf[:k]); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read content: %w", err)
		}
	}
	if got != size {
		return fmt.Errorf("content has %d bytes, metadata says %d", got, size)
	}
	return nil
}

// readChunk returns piece n of the content under key; cond and its args
// end the WHERE clause (a workspace scope).
func (s *Store) readChunk(ctx context.Context, key string, n int, cond string, args []any) ([]byte, error) {
	var data []byte
	err := s.r.QueryRow(ctx, `SELECT data FROM file_chunks WHERE file_id = ? AND n = ?`+cond, append([]any{key, n}, args...)...).Scan(&data)
	return data, err
}
