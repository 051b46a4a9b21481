package httpapi

import (
	"context"
	"fmt"

	"github.com/reinsdev/reins/internal/memories"
	ma "github.com/reinsdev/reins/managedagents"
)

// Limits of the memory_store resources of a session.
const (
	// maxMemoryStores bounds the memory stores of one session.
	maxMemoryStores = 8
	// maxMemoryInstructions bounds a resource's instructions
	// (characters).
	maxMemoryInstructions = 4096
)

// memoryStoreResource validates a memory_store resource of a session
// create: the store exists in the request's workspace and is not
// archived. The resource keeps the store's name and description as they
// are now; its mount path is the slug of its name (memoryMounts makes it
// unique).
func (s *Server) memoryStoreResource(ctx context.Context, field string, p *resourceParam) (ma.SessionResource, error) {
	var res ma.SessionResource
	switch {
	case p.FileID != "" || p.URL != "" || len(p.Checkout) > 0 || p.Token != "":
		return res, badRequest("%s: only type, memory_store_id, access and instructions are fields of a memory_store resource", field)
	case p.MountPath != nil:
		return res, badRequest("%s.mount_path: a memory store's mount path is chosen by the server (/mnt/memory/<slug of its name>) and returned; it cannot be set", field)
	case p.MemoryStoreID == "":
		return res, badRequest("%s.memory_store_id: required", field)
	}
	access := p.Access
	switch access {
	case "":
		access = "read_write"
	case "read_write", "read_only":
	default:
		return res, unknownValue(field+".access", "access", access, []string{"read_write", "read_only"})
	}
	if p.Instructions != nil {
		if err := checkLen(field+".instructions", *p.Instructions, 0, maxMemoryInstructions); err != nil {
			return res, err
		}
	}
	ms, err := s.resourceRows.GetMemoryStore(ctx, p.MemoryStoreID)
	if err != nil {
		return res, err
	}
	if ms.ArchivedAt != nil {
		return res, badRequest("%s.memory_store_id: memory store %s is archived; it cannot be attached to new sessions", field, ms.ID)
	}
	return ma.SessionResource{Type: "memory_store", MemoryStoreID: ms.ID, Access: access, Name: ms.Name, Description: ms.Description,
		Instructions: p.Instructions, MountPath: ma.MemoryMountRoot + "/" + memories.Slug(ms.Name)}, nil
}

// memoryMounts checks the memory_store resources of one session create
// as they come: at most maxMemoryStores, each store once, and a mount
// path of its own (a second store whose name has the same slug gets
// "-2", and so on).
type memoryMounts struct {
	stores map[string]bool
	paths  map[string]bool
}

func (m *memoryMounts) add(field string, res *ma.SessionResource) error {
	if res.Type != "memory_store" {
		return nil
	}
	if m.stores == nil {
		m.stores, m.paths = map[string]bool{}, map[string]bool{}
	}
	if m.stores[res.MemoryStoreID] {
		return badRequest("%s.memory_store_id: memory store %s is already a resource of the session", field, res.MemoryStoreID)
	}
	if len(m.stores) == maxMemoryStores {
		return badRequest("resources: at most %d memory stores per session", maxMemoryStores)
	}
	m.stores[res.MemoryStoreID] = true
	base := res.MountPath
	for n := 2; m.paths[res.MountPath]; n++ {
		res.MountPath = fmt.Sprintf("%s-%d", base, n)
	}
	m.paths[res.MountPath] = true
	return nil
}
