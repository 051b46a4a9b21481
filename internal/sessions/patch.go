package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Patch is a change to a session's title, metadata or tools (PATCH
// /v1/sessions/{id}); what is not set is left as it is.
type Patch struct {
	Title *string
	// Metadata, if not nil, is applied to the session's metadata: a nil
	// or empty value deletes its key.
	Metadata map[string]*string
	// Tools, if set, returns the session's new tools and MCP servers from
	// its agent as it is (the agent's configuration rules are its own);
	// an error from it is returned as is.
	Tools func(cur ma.SessionAgent) ([]ma.Tool, []ma.MCPServer, error)
	// SetBudget replaces the session's budget with Budget (nil removes
	// it), by the rules of [Service.changeBudget].
	SetBudget bool
	Budget    *ma.Budget
}

// Patch changes a session as p says and logs a session.updated event
// naming what changed. An archived session is read-only, and a running
// session's tools cannot change.
func (s *Service) Patch(ctx context.Context, id string, p Patch) (ma.Session, error) {
	budgetChanged := false
	sess, err := s.update(ctx, id, func(tx store.Tx) error {
		cur := tx.Session()
		if cur.ArchivedAt != nil {
			return conflict("session %s is archived and read-only", cur.ID)
		}
		changed := &ma.Event{Type: ma.EventSessionUpdated}
		touched := false
		if p.Title != nil {
			if err := checkTitle(*p.Title); err != nil {
				return err
			}
			if *p.Title != cur.Title {
				cur.Title = *p.Title
				t := cur.Title
				changed.Title = &t
				touched = true
			}
		}
		if p.Metadata != nil {
			next := ApplyMetadata(cur.Metadata, p.Metadata)
			if err := CheckMetadata("metadata", next); err != nil {
				return err
			}
			cur.Metadata = next
			changed.Metadata = cur.Metadata
			touched = true
		}
		if p.Tools != nil {
			if err := patchTools(cur, changed, p.Tools); err != nil {
				return err
			}
			touched = true
		}
		if p.SetBudget {
			was := cur.Budget
			if err := s.changeBudget(cur, p.Budget, time.Now()); err != nil {
				return err
			}
			if !sameBudget(was, cur.Budget) {
				b, err := json.Marshal(cur.Budget)
				if err != nil {
					return err
				}
				changed.Budget, touched, budgetChanged = b, true, true
			}
		}
		if !touched {
			return nil
		}
		now := ma.Time(time.Now())
		cur.UpdatedAt = now
		changed.ProcessedAt = &now
		return tx.Append(changed)
	})
	if err == nil && budgetChanged {
		// A session stopped at its budget resumes when it is raised or
		// removed.
		s.cfg.Runner.Wake(id)
	}
	return sess, err
}

// sameBudget reports whether two budgets are the same.
func sameBudget(a, b *ma.Budget) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// patchTools sets the tools and MCP servers of cur's agent from resolve
// and records them in changed.
func patchTools(cur *ma.Session, changed *ma.Event, resolve func(ma.SessionAgent) ([]ma.Tool, []ma.MCPServer, error)) error {
	if cur.Status == ma.StatusRunning {
		return conflict("agent: the session is running; change its tools while it is idle")
	}
	tools, servers, err := resolve(cur.Agent)
	if err != nil {
		return err
	}
	cur.Agent.Tools, cur.Agent.MCPServers = tools, servers
	b, err := json.Marshal(map[string]any{"tools": tools, "mcp_servers": servers})
	if err != nil {
		return err
	}
	changed.Agent = b
	return nil
}

// AddResource adds a resource, validated on its own by the caller, to a
// session that is not archived, and logs a session.updated event. Its
// mount path must be free and the session below MaxResources.
func (s *Service) AddResource(ctx context.Context, id string, res ma.SessionResource) error {
	return s.changeResources(ctx, id, func(cur []ma.SessionResource) ([]ma.SessionResource, error) {
		if len(cur) >= MaxResources {
			return nil, rejected("resources: a session has at most %d resources", MaxResources)
		}
		for _, r := range cur {
			if r.MountPath == res.MountPath {
				return nil, rejected("resource.mount_path: %s is the mount path of another resource of the session", res.MountPath)
			}
		}
		return append(cur, res), nil
	})
}

// RemoveResource removes a resource from a session that is not archived,
// and logs a session.updated event.
func (s *Service) RemoveResource(ctx context.Context, id, rid string) error {
	return s.changeResources(ctx, id, func(cur []ma.SessionResource) ([]ma.SessionResource, error) {
		for i, res := range cur {
			if res.ID == rid {
				return append(cur[:i:i], cur[i+1:]...), nil
			}
		}
		return nil, notFound("resource %s of session %s not found", rid, id)
	})
}

// changeResources runs fn on the resources of a session that is not
// archived and records the change with a session.updated event.
func (s *Service) changeResources(ctx context.Context, id string, fn func(cur []ma.SessionResource) ([]ma.SessionResource, error)) error {
	_, err := s.update(ctx, id, func(tx store.Tx) error {
		cur := tx.Session()
		if cur.ArchivedAt != nil {
			return conflict("session %s is archived and read-only", cur.ID)
		}
		all, err := Resources(cur)
		if err != nil {
			return err
		}
		next, err := fn(all)
		if err != nil {
			return err
		}
		cur.Resources = make([]ma.Raw, len(next))
		for i, res := range next {
			if cur.Resources[i], err = json.Marshal(res); err != nil {
				return err
			}
		}
		now := ma.Time(time.Now())
		cur.UpdatedAt = now
		return tx.Append(&ma.Event{Type: ma.EventSessionUpdated, ProcessedAt: &now})
	})
	return err
}

// Resources decodes a session's resources.
func Resources(sess *ma.Session) ([]ma.SessionResource, error) {
	out := make([]ma.SessionResource, 0, len(sess.Resources))
	for _, raw := range sess.Resources {
		var r ma.SessionResource
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("resource of session %s: %w", sess.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}
