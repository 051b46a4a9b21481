package memsync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// HTTPStore is a Store over the memory endpoints of a reins server (or
// of the Managed Agents API), for hands that sync a session's stores
// from another machine: `reins executor`. Token is the session's
// sessions token (or another credential the endpoints accept).
type HTTPStore struct {
	BaseURL string
	Token   string
	Client  *http.Client
}

// memoryBeta is the beta header of the memory endpoints.
const memoryBeta = "agent-memory-2026-07-22"

// maxResponse bounds one response: a page of 100 basic memories, or one
// memory of 100 kB as JSON, is far below it.
const maxResponse = 8 << 20

// apiError is the error envelope of the API.
type apiError struct {
	Status int
	Error  struct {
		Type                string `json:"type"`
		Message             string `json:"message"`
		ConflictingMemoryID string `json:"conflicting_memory_id"`
		ConflictingPath     string `json:"conflicting_path"`
	} `json:"error"`
}

// err maps the API's memory errors to a Store's.
func (e *apiError) err(method, path string) error {
	msg := fmt.Sprintf("%s %s: %d %s: %s", method, path, e.Status, e.Error.Type, e.Error.Message)
	switch {
	case e.Status == http.StatusNotFound:
		return fmt.Errorf("%s: %w", msg, ErrNotFound)
	case e.Error.Type == ma.ErrMemoryPathConflict:
		return &PathConflictError{MemoryID: e.Error.ConflictingMemoryID, MemoryPath: e.Error.ConflictingPath}
	case e.Error.Type == ma.ErrMemoryPrecondition:
		return fmt.Errorf("%s: %w", msg, ErrPrecondition)
	case e.Status == http.StatusConflict && strings.Contains(e.Error.Message, "archived"):
		return fmt.Errorf("%s: %w", msg, ErrArchived)
	case e.Status == http.StatusBadRequest && strings.Contains(e.Error.Message, "the most a store holds"):
		return fmt.Errorf("%s: %w", msg, ErrLimit)
	}
	return fmt.Errorf("%s", msg)
}

// do sends one request and decodes a 200 answer into out.
func (h *HTTPStore) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(h.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+h.Token)
	req.Header.Set("anthropic-beta", memoryBeta)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &apiError{Status: resp.StatusCode}
		json.Unmarshal(data, e)
		return e.err(method, path)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

func storePath(storeID string) string { return "/v1/memory_stores/" + url.PathEscape(storeID) }

// ListMemories implements Store, reading page after page.
func (h *HTTPStore) ListMemories(ctx context.Context, storeID string) ([]ma.Memory, error) {
	var out []ma.Memory
	page := ""
	for range ma.MaxMemoriesPerStore/100 + 2 {
		q := url.Values{"limit": {"100"}, "view": {"basic"}}
		if page != "" {
			q.Set("page", page)
		}
		var p ma.Page[ma.Memory]
		if err := h.do(ctx, http.MethodGet, storePath(storeID)+"/memories?"+q.Encode(), nil, &p); err != nil {
			return nil, err
		}
		out = append(out, p.Data...)
		if p.NextPage == nil || *p.NextPage == "" {
			return out, nil
		}
		page = *p.NextPage
	}
	return nil, fmt.Errorf("list memory store %s: more pages than a store can hold", storeID)
}

// GetMemory implements Store.
func (h *HTTPStore) GetMemory(ctx context.Context, storeID, id string) (ma.Memory, error) {
	var m ma.Memory
	err := h.do(ctx, http.MethodGet, storePath(storeID)+"/memories/"+url.PathEscape(id)+"?view=full", nil, &m)
	return m, err
}

// CreateMemory implements Store (the server names the memory and its
// version, and records the credential's actor).
func (h *HTTPStore) CreateMemory(ctx context.Context, w Write) (ma.Memory, error) {
	var m ma.Memory
	err := h.do(ctx, http.MethodPost, storePath(w.StoreID)+"/memories", map[string]any{"path": w.Path, "content": w.Content}, &m)
	return m, err
}

// UpdateMemory implements Store.
func (h *HTTPStore) UpdateMemory(ctx context.Context, w Write) (ma.Memory, error) {
	body := map[string]any{}
	if w.Content != nil {
		body["content"] = *w.Content
	}
	if w.Path != nil {
		body["path"] = *w.Path
	}
	if w.IfSHA256 != "" {
		body["precondition"] = map[string]string{"type": "content_sha256", "content_sha256": w.IfSHA256}
	}
	var m ma.Memory
	err := h.do(ctx, http.MethodPost, storePath(w.StoreID)+"/memories/"+url.PathEscape(w.MemoryID), body, &m)
	return m, err
}

// DeleteMemory implements Store.
func (h *HTTPStore) DeleteMemory(ctx context.Context, w Write) error {
	path := storePath(w.StoreID) + "/memories/" + url.PathEscape(w.MemoryID)
	if w.IfSHA256 != "" {
		path += "?expected_content_sha256=" + url.QueryEscape(w.IfSHA256)
	}
	return h.do(ctx, http.MethodDelete, path, nil, nil)
}

// NewestVersion implements Store (versions are listed newest first).
func (h *HTTPStore) NewestVersion(ctx context.Context, storeID string) (string, error) {
	var p ma.Page[ma.MemoryVersion]
	if err := h.do(ctx, http.MethodGet, storePath(storeID)+"/memory_versions?limit=1", nil, &p); err != nil {
		return "", err
	}
	if len(p.Data) == 0 {
		return "", nil
	}
	return p.Data[0].ID, nil
}

var _ Store = (*HTTPStore)(nil)
