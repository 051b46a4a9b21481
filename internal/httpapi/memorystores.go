package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Beta headers of the memory endpoints: a request sends one of them.
const (
	memoryBeta        = "agent-memory-2026-07-22"
	managedAgentsBeta = "managed-agents-2026-04-01"
)

// memoryStoreRows is what the memory endpoints need of the store.
type memoryStoreRows interface {
	store.MemoryStores
}

// memoryAPI serves the memory store, memory and memory version endpoints.
type memoryAPI struct {
	st memoryStoreRows
}

// memoryRoutes registers the 14 memory endpoints.
func (s *Server) memoryRoutes() {
	m := &memoryAPI{st: s.cfg.Store}
	for pattern, h := range map[string]handlerFunc{
		"POST /v1/memory_stores":                                   m.createStore,
		"GET /v1/memory_stores":                                    m.listStores,
		"GET /v1/memory_stores/{id}":                               m.getStore,
		"POST /v1/memory_stores/{id}":                              m.updateStore,
		"POST /v1/memory_stores/{id}/archive":                      noBody(m.archiveStore),
		"DELETE /v1/memory_stores/{id}":                            noBody(m.deleteStore),
		"POST /v1/memory_stores/{id}/memories":                     m.createMemory,
		"GET /v1/memory_stores/{id}/memories":                      m.listMemories,
		"GET /v1/memory_stores/{id}/memories/{mid}":                m.getMemory,
		"POST /v1/memory_stores/{id}/memories/{mid}":               m.updateMemory,
		"DELETE /v1/memory_stores/{id}/memories/{mid}":             noBody(m.deleteMemory),
		"GET /v1/memory_stores/{id}/memory_versions":               m.listVersions,
		"GET /v1/memory_stores/{id}/memory_versions/{vid}":         m.getVersion,
		"POST /v1/memory_stores/{id}/memory_versions/{vid}/redact": noBody(m.redactVersion),
	} {
		// A memory's content is at most 100 kB, which JSON escapes can
		// make six times larger.
		s.handle(pattern, 2*smallBody, memoryHeaders(h))
	}
}

// memoryHeaders checks the beta header of a memory request: it names
// agent-memory-2026-07-22 or managed-agents-2026-04-01, not both (the
// guide's rule). Store errors become the memory error types.
func memoryHeaders(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var mem, agents bool
		for _, v := range r.Header.Values("anthropic-beta") {
			for _, b := range strings.Split(v, ",") {
				mem = mem || strings.TrimSpace(b) == memoryBeta
				agents = agents || strings.TrimSpace(b) == managedAgentsBeta
			}
		}
		switch {
		case mem && agents:
			return badRequest("anthropic-beta: send either %s or %s on a memory store request, not both", memoryBeta, managedAgentsBeta)
		case !mem && !agents:
			return badRequest("anthropic-beta: the memory store endpoints are in beta; send the header anthropic-beta: %s", memoryBeta)
		}
		return memoryError(h(w, r))
	}
}

// memoryError maps the store's memory errors to the API's.
func memoryError(err error) error {
	var pc *store.PathConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pc):
		e := errf(http.StatusConflict, ma.ErrMemoryPathConflict, "%s", pc.Error())
		e.noRetry = true
		e.conflictingMemoryID, e.conflictingPath = &pc.MemoryID, &pc.MemoryPath
		return e
	case errors.Is(err, store.ErrPrecondition):
		e := errf(http.StatusConflict, ma.ErrMemoryPrecondition, "%s", trimSentinel(err, store.ErrPrecondition))
		e.noRetry = true
		return e
	case errors.Is(err, store.ErrArchived):
		return conflict("%s", trimSentinel(err, store.ErrArchived))
	case errors.Is(err, store.ErrLimit):
		return badRequest("%s", trimSentinel(err, store.ErrLimit))
	}
	return err
}

// trimSentinel is err's message without its sentinel's.
func trimSentinel(err, sentinel error) string {
	return strings.TrimSuffix(err.Error(), ": "+sentinel.Error())
}

// actor is who a request acts for, as memory versions record it: the
// session of a sessions token (a pull worker syncing the session's
// memory), the API key (nil for the bootstrap key, which has no id).
func actor(r *http.Request) *ma.Actor {
	p := principal(r)
	if p.Grant != nil {
		return &ma.Actor{Type: ma.ActorSession, SessionID: p.Grant.SessionID}
	}
	if p.KeyID == "" {
		return nil
	}
	return &ma.Actor{Type: ma.ActorAPI, APIKeyID: p.KeyID}
}

type memoryStoreCreate struct {
	Name        *string           `json:"name"`
	Description *string           `json:"description"`
	Metadata    map[string]string `json:"metadata"`
}

// checkStoreName checks a memory store's name: 1 to 255 characters, no
// control characters.
func checkStoreName(name string) error {
	if err := checkLen("name", name, 1, 255); err != nil {
		return err
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return badRequest("name: must not contain control characters")
	}
	return nil
}

func (m *memoryAPI) createStore(w http.ResponseWriter, r *http.Request) error {
	var p memoryStoreCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if p.Name == nil {
		return badRequest("name: required")
	}
	if err := checkStoreName(*p.Name); err != nil {
		return err
	}
	ms := ma.MemoryStore{ID: ids.New(ids.MemoryStore), Type: "memory_store", Name: *p.Name, Metadata: ma.Metadata{}}
	if p.Description != nil {
		if err := checkLen("description", *p.Description, 0, 1024); err != nil {
			return err
		}
		ms.Description = *p.Description
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return err
	}
	for k, v := range p.Metadata {
		ms.Metadata[k] = v
	}
	ms.CreatedAt = ma.Time(time.Now())
	ms.UpdatedAt = ms.CreatedAt
	ctx := withAudit(r, "memory_store.created", "memory_store", ms.ID, requestWorkspace(r), map[string]string{"name": ms.Name})
	if err := m.st.CreateMemoryStore(ctx, ms); err != nil {
		return err
	}
	writeJSON(w, ms)
	return nil
}

func (m *memoryAPI) getStore(w http.ResponseWriter, r *http.Request) error {
	ms, err := m.st.GetMemoryStore(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, ms)
	return nil
}

type memoryStoreUpdate struct {
	Name        optString     `json:"name"`
	Description optString     `json:"description"`
	Metadata    metadataPatch `json:"metadata"`
}

func (m *memoryAPI) updateStore(w http.ResponseWriter, r *http.Request) error {
	var p memoryStoreUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	ctx := withAudit(r, "memory_store.updated", "memory_store", r.PathValue("id"), requestWorkspace(r), nil)
	ms, err := m.st.UpdateMemoryStore(ctx, r.PathValue("id"), func(cur *ma.MemoryStore) error {
		if cur.ArchivedAt != nil {
			return conflict("memory store %s is archived and read-only", cur.ID)
		}
		return p.apply(cur)
	})
	if err != nil {
		return err
	}
	writeJSON(w, ms)
	return nil
}

// apply applies the update to cur, moving updated_at when it changes it.
func (p memoryStoreUpdate) apply(cur *ma.MemoryStore) error {
	before := *cur
	if p.Name.Set {
		if p.Name.Null {
			return badRequest("name: cannot be cleared")
		}
		if err := checkStoreName(p.Name.Value); err != nil {
			return err
		}
		cur.Name = p.Name.Value
	}
	if p.Description.Set {
		if err := checkLen("description", p.Description.Value, 0, 1024); err != nil {
			return err
		}
		cur.Description = p.Description.Value // null and "" clear it
	}
	changed := cur.Name != before.Name || cur.Description != before.Description
	if p.Metadata != nil {
		if err := validateMetadataPatch("metadata", cur.Metadata, p.Metadata); err != nil {
			return err
		}
		next := applyMetadata(cur.Metadata, p.Metadata)
		changed = changed || !sameMetadata(cur.Metadata, next)
		cur.Metadata = next
	}
	if changed {
		cur.UpdatedAt = ma.Time(time.Now())
	}
	return nil
}

func sameMetadata(a, b ma.Metadata) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (m *memoryAPI) archiveStore(w http.ResponseWriter, r *http.Request) error {
	ctx := withAudit(r, "memory_store.archived", "memory_store", r.PathValue("id"), requestWorkspace(r), nil)
	ms, err := m.st.ArchiveMemoryStore(ctx, r.PathValue("id"), time.Now())
	if err != nil {
		return err
	}
	writeJSON(w, ms)
	return nil
}

func (m *memoryAPI) deleteStore(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := m.st.DeleteMemoryStore(withAudit(r, "memory_store.deleted", "memory_store", id, requestWorkspace(r), nil), id); err != nil {
		return err
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "memory_store_deleted"})
	return nil
}

func (m *memoryAPI) listStores(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	items, err := m.st.ListMemoryStores(r.Context(), lq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}
