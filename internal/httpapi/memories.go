package httpapi

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Views of memories and versions: basic leaves content out.
var memoryViews = []string{"basic", "full"}

// view reads the view parameter (def when absent) and reports whether it
// is full.
func view(r *http.Request, def string) (bool, error) {
	v, err := query{r}.enum("view", "view", def, memoryViews)
	return v == "full", err
}

// shown is m as the view shows it.
func shown(m ma.Memory, full bool) ma.Memory {
	if !full {
		m.Content = nil
	}
	return m
}

func checkMemoryPath(field, p string) error {
	if err := ma.CheckMemoryPath(p); err != nil {
		return badRequest("%s: %v", field, err)
	}
	return nil
}

func checkMemoryContent(c string) error {
	if err := ma.CheckMemoryContent(c); err != nil {
		return badRequest("content: %v", err)
	}
	return nil
}

// checkSHA256 checks a content_sha256 value: 64 lowercase hex digits.
func checkSHA256(field, v string) error {
	if _, err := hex.DecodeString(v); err != nil || len(v) != 64 || strings.ToLower(v) != v {
		return badRequest("%s: must be a SHA-256 digest in 64 lowercase hexadecimal digits, got %q", field, v)
	}
	return nil
}

type memoryCreate struct {
	Path    *string `json:"path"`
	Content *string `json:"content"`
}

func (m *memoryAPI) createMemory(w http.ResponseWriter, r *http.Request) error {
	full, err := view(r, "basic")
	if err != nil {
		return err
	}
	var p memoryCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	switch {
	case p.Path == nil:
		return badRequest("path: required")
	case p.Content == nil:
		return badRequest("content: required (it may be \"\")")
	}
	if err := checkMemoryPath("path", *p.Path); err != nil {
		return err
	}
	if err := checkMemoryContent(*p.Content); err != nil {
		return err
	}
	mem, err := m.st.CreateMemory(r.Context(), store.MemoryWrite{StoreID: r.PathValue("id"), MemoryID: ids.New(ids.Memory),
		VersionID: ids.New(ids.MemoryVersion), Path: p.Path, Content: p.Content, Actor: actor(r), At: time.Now()})
	if err != nil {
		return err
	}
	writeJSON(w, shown(mem, full))
	return nil
}

func (m *memoryAPI) getMemory(w http.ResponseWriter, r *http.Request) error {
	full, err := view(r, "full")
	if err != nil {
		return err
	}
	mem, err := m.st.GetMemory(r.Context(), r.PathValue("id"), r.PathValue("mid"))
	if err != nil {
		return err
	}
	writeJSON(w, shown(mem, full))
	return nil
}

type memoryUpdate struct {
	Path         optString     `json:"path"`
	Content      optString     `json:"content"`
	Precondition *precondition `json:"precondition"`
}

type precondition struct {
	Type          string `json:"type"`
	ContentSHA256 string `json:"content_sha256"`
}

// write is the store write the update asks for.
func (p memoryUpdate) write(r *http.Request) (store.MemoryWrite, error) {
	wr := store.MemoryWrite{StoreID: r.PathValue("id"), MemoryID: r.PathValue("mid"), VersionID: ids.New(ids.MemoryVersion),
		Actor: actor(r), At: time.Now()}
	if p.Path.Set {
		if p.Path.Null {
			return wr, badRequest("path: cannot be null; omit it to keep the path")
		}
		if err := checkMemoryPath("path", p.Path.Value); err != nil {
			return wr, err
		}
		wr.Path = &p.Path.Value
	}
	if p.Content.Set {
		if p.Content.Null {
			return wr, badRequest("content: cannot be null; omit it to keep the content")
		}
		if err := checkMemoryContent(p.Content.Value); err != nil {
			return wr, err
		}
		wr.Content = &p.Content.Value
	}
	if pc := p.Precondition; pc != nil {
		if pc.Type != "content_sha256" {
			return wr, unknownValue("precondition.type", "precondition type", pc.Type, []string{"content_sha256"})
		}
		if err := checkSHA256("precondition.content_sha256", pc.ContentSHA256); err != nil {
			return wr, err
		}
		wr.IfSHA256 = pc.ContentSHA256
	}
	return wr, nil
}

func (m *memoryAPI) updateMemory(w http.ResponseWriter, r *http.Request) error {
	full, err := view(r, "basic")
	if err != nil {
		return err
	}
	var p memoryUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	wr, err := p.write(r)
	if err != nil {
		return err
	}
	mem, err := m.st.UpdateMemory(r.Context(), wr)
	if err != nil {
		return err
	}
	writeJSON(w, shown(mem, full))
	return nil
}

func (m *memoryAPI) deleteMemory(w http.ResponseWriter, r *http.Request) error {
	wr := store.MemoryWrite{StoreID: r.PathValue("id"), MemoryID: r.PathValue("mid"), VersionID: ids.New(ids.MemoryVersion),
		Actor: actor(r), At: time.Now()}
	if v := (query{r}).str("expected_content_sha256"); v != "" {
		if err := checkSHA256("expected_content_sha256", v); err != nil {
			return err
		}
		wr.IfSHA256 = v
	}
	if err := m.st.DeleteMemory(r.Context(), wr); err != nil {
		return err
	}
	writeJSON(w, ma.Deleted{ID: wr.MemoryID, Type: "memory_deleted"})
	return nil
}

// memoryCursor is the page token of a memory list: the key (path) of the
// last item of the page before.
type memoryCursor struct {
	After string `json:"a"`
}

func (c memoryCursor) encode() *string {
	b, _ := json.Marshal(c)
	s := "page_" + base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// memoryListQuery reads the query of a memory list.
func memoryListQuery(r *http.Request) (store.MemoryQuery, error) {
	q := query{r}
	var mq store.MemoryQuery
	var err error
	if mq.Full, err = view(r, "basic"); err != nil {
		return mq, err
	}
	if mq.Limit, err = q.limit(20, 100); err != nil {
		return mq, err
	}
	if mq.Full {
		mq.Limit = min(mq.Limit, 20) // a full page holds at most 20
	}
	switch d := q.str("depth"); d {
	case "", "0":
	case "1":
		mq.Depth = 1
	default:
		return mq, badRequest("depth: must be 0 (the whole subtree) or 1 (direct children), got %q", d)
	}
	if mq.Prefix = q.str("path_prefix"); mq.Prefix != "" {
		if err := memories.CheckPrefix(mq.Prefix); err != nil {
			return mq, badRequest("path_prefix: %v", err)
		}
	}
	if page := q.str("page"); page != "" {
		var c memoryCursor
		raw, ok := strings.CutPrefix(page, "page_")
		b, err := base64.RawURLEncoding.DecodeString(raw)
		if !ok || err != nil || json.Unmarshal(b, &c) != nil || c.After == "" {
			return mq, badRequest("page: invalid page cursor")
		}
		mq.After = c.After
	}
	return mq, nil
}

func (m *memoryAPI) listMemories(w http.ResponseWriter, r *http.Request) error {
	mq, err := memoryListQuery(r)
	if err != nil {
		return err
	}
	items, err := m.st.ListMemories(r.Context(), r.PathValue("id"), mq)
	if err != nil {
		return err
	}
	page := ma.Page[any]{Data: make([]any, len(items))}
	for i, it := range items {
		if it.Memory != nil {
			page.Data[i] = shown(*it.Memory, mq.Full)
		} else {
			page.Data[i] = ma.MemoryPrefix{Type: "memory_prefix", Path: it.Prefix}
		}
	}
	if len(items) > 0 && len(items) == mq.Limit {
		page.NextPage = memoryCursor{After: items[len(items)-1].Key()}.encode()
	}
	writeJSON(w, page)
	return nil
}

// versionOperations are the values of the versions list's operation.
var versionOperations = []string{ma.MemoryCreated, ma.MemoryModified, ma.MemoryDeleted}

// shownVersion is v as the view shows it.
func shownVersion(v ma.MemoryVersion, full bool) ma.MemoryVersion {
	if !full {
		v.Content = nil
	}
	return v
}

func (m *memoryAPI) listVersions(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "desc")
	if err != nil {
		return err
	}
	q := query{r}
	vq := store.MemoryVersionQuery{ListQuery: lq, MemoryID: q.str("memory_id"), SessionID: q.str("session_id"),
		APIKeyID: q.str("api_key_id"), ServiceAccountID: q.str("service_account_id")}
	if vq.Operation, err = q.enum("operation", "operation", "", versionOperations); err != nil {
		return err
	}
	if vq.Full, err = view(r, "basic"); err != nil {
		return err
	}
	if vq.Full {
		vq.Limit = min(vq.Limit, 20)
	}
	items, err := m.st.ListMemoryVersions(r.Context(), r.PathValue("id"), vq)
	if err != nil {
		return err
	}
	writePageOf(w, items, vq.ListQuery, order, func(v ma.MemoryVersion) ma.MemoryVersion { return shownVersion(v, vq.Full) })
	return nil
}

func (m *memoryAPI) getVersion(w http.ResponseWriter, r *http.Request) error {
	full, err := view(r, "full")
	if err != nil {
		return err
	}
	v, err := m.st.GetMemoryVersion(r.Context(), r.PathValue("id"), r.PathValue("vid"))
	if err != nil {
		return err
	}
	writeJSON(w, shownVersion(v, full))
	return nil
}

func (m *memoryAPI) redactVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := m.st.RedactMemoryVersion(r.Context(), r.PathValue("id"), r.PathValue("vid"), actor(r), time.Now())
	if err != nil {
		return err
	}
	writeJSON(w, v)
	return nil
}
