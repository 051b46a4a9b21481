package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// SessionGrant is what a sessions token (reins_st_…) grants: the work of
// one session, as a pull worker does it. The work queue hands a new token
// out with each poll of a work item, in the item's secret.
type SessionGrant struct {
	// SessionID is the session the token works for.
	SessionID string
	// WorkID and EnvironmentID name the work item the token was handed
	// out with.
	WorkID, EnvironmentID string
}

// SessionTokenStore is what an [Authenticator] reads to check sessions
// tokens.
type SessionTokenStore interface {
	SessionTokenByHash(ctx context.Context, hash string) (store.SessionToken, error)
}

// checkSessionsToken authenticates a sessions token by its hash: it must
// be known, its session neither deleted nor archived, the environment key
// whose poll handed it out not revoked and its environment not archived.
// A terminated session's token still works: the official worker syncs the
// session's memory and stops its work item after it sees the session end.
func (a *Authenticator) checkSessionsToken(ctx context.Context, hash string) (Principal, error) {
	t, err := a.SessionTokens.SessionTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "invalid sessions token, or its session was deleted")
	}
	if err != nil {
		return Principal{}, err
	}
	switch {
	case t.SessionArchived:
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "sessions token rejected: session %s is archived", t.SessionID)
	case t.KeyRevoked:
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication,
			"sessions token rejected: environment key %s, whose poll handed it out, is revoked", t.EnvironmentKeyID)
	case t.EnvironmentArchived:
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "sessions token rejected: environment %s is archived", t.EnvironmentID)
	}
	// The token works in its session's workspace: the store scopes its
	// requests there, as an API key's.
	return Principal{Workspace: t.WorkspaceID, hash: hash,
		Grant: &SessionGrant{SessionID: t.SessionID, WorkID: t.WorkID, EnvironmentID: t.EnvironmentID}}, nil
}

// sessionsScope limits a sessions token to what the official worker does
// for its work item: read the session, list, stream and send its events
// (which events, sendEvents checks with [Principal.mayPost]); get, ack,
// heartbeat and stop its work item; list, read, create, update and delete
// the memories of the memory stores attached to the session (writes only
// where the session's access is read_write); read the versions of the
// skills of the session's agent, which the worker downloads. Another
// session, work item, memory store or skill is "not found", as a foreign
// one is; any other endpoint is 403.
func (s *Server) sessionsScope(r *http.Request, g SessionGrant) error {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) >= 3 && parts[0] == "v1" {
		switch parts[1] {
		case "sessions":
			return tokenSession(r, g, parts[2:])
		case "environments":
			return tokenWork(r, g, parts[2:])
		case "memory_stores":
			return s.tokenMemory(r, g, parts[2:])
		case "skills":
			return s.tokenSkill(r, g, parts[2:])
		}
	}
	return tokenDenied()
}

func tokenDenied() error {
	return errf(http.StatusForbidden, ma.ErrPermission,
		"a sessions token can only use its own session (read it and its events, send tool results), its own work item, "+
			"the memories of the memory stores attached to its session, and the skills of its session's agent")
}

// tokenSession: parts are the path after /v1/sessions/.
func tokenSession(r *http.Request, g SessionGrant, parts []string) error {
	tail := strings.Join(parts[1:], "/")
	ok := (tail == "" && r.Method == http.MethodGet) || (tail == "events" && (r.Method == http.MethodGet || r.Method == http.MethodPost)) ||
		(tail == "events/stream" && r.Method == http.MethodGet)
	switch {
	case !ok:
		return tokenDenied()
	case parts[0] != g.SessionID:
		return notFound("session %s not found", parts[0])
	}
	return nil
}

// tokenWork: parts are the path after /v1/environments/.
func tokenWork(r *http.Request, g SessionGrant, parts []string) error {
	if len(parts) < 3 || parts[1] != "work" || parts[2] == "poll" || parts[2] == "stats" || len(parts) > 4 {
		return tokenDenied()
	}
	ok := (len(parts) == 3 && r.Method == http.MethodGet) ||
		(len(parts) == 4 && r.Method == http.MethodPost && slices.Contains([]string{"ack", "heartbeat", "stop"}, parts[3]))
	switch {
	case !ok:
		return tokenDenied()
	case parts[0] != g.EnvironmentID || parts[2] != g.WorkID:
		return notFound("work %s not found", parts[2])
	}
	return nil
}

// tokenMemory: parts are the path after /v1/memory_stores/. Only the
// memories endpoints are open, on the stores the session has attached.
func (s *Server) tokenMemory(r *http.Request, g SessionGrant, parts []string) error {
	if len(parts) < 2 || len(parts) > 3 || parts[1] != "memories" {
		return tokenDenied()
	}
	sess, err := s.sessionRows.GetSession(r.Context(), g.SessionID)
	if err != nil {
		return err
	}
	res, attached := memoryResource(sess, parts[0])
	switch {
	case !attached:
		return notFound("memory store %s not found", parts[0])
	case res.Access == "read_only" && r.Method != http.MethodGet && r.Method != http.MethodHead:
		return errf(http.StatusForbidden, ma.ErrPermission,
			"memory store %s is attached to session %s read_only: its sessions token can read the store's memories but not change them", parts[0], g.SessionID)
	}
	return nil
}

// memoryResource returns the session's memory_store resource of the
// store id.
func memoryResource(sess ma.Session, id string) (ma.SessionResource, bool) {
	for _, raw := range sess.Resources {
		var res ma.SessionResource
		if json.Unmarshal(raw, &res) == nil && res.Type == "memory_store" && res.MemoryStoreID == id {
			return res, true
		}
	}
	return ma.SessionResource{}, false
}

// tokenSkill: parts are the path after /v1/skills/. The versions of the
// skills of the session's agent (its own and its subagents') may be read.
func (s *Server) tokenSkill(r *http.Request, g SessionGrant, parts []string) error {
	if r.Method != http.MethodGet || len(parts) < 2 || parts[1] != "versions" || len(parts) > 4 || len(parts) == 4 && parts[3] != "content" {
		return tokenDenied()
	}
	sess, err := s.sessionRows.GetSession(r.Context(), g.SessionID)
	if err != nil {
		return err
	}
	agent, err := json.Marshal(sess.Agent)
	if err != nil {
		return err
	}
	var tree any
	if err := json.Unmarshal(agent, &tree); err != nil {
		return err
	}
	if !slices.Contains(skillIDs(tree, nil), parts[0]) {
		return notFound("skill %s not found", parts[0])
	}
	return nil
}

// skillIDs appends the skill_id values found anywhere in v, a decoded
// JSON value: an agent's skills and those of the agents its multiagent
// configuration names.
func skillIDs(v any, ids []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if id, ok := x.(string); ok && k == "skill_id" {
				ids = append(ids, id)
				continue
			}
			ids = skillIDs(x, ids)
		}
	case []any:
		for _, x := range v {
			ids = skillIDs(x, ids)
		}
	}
	return ids
}
