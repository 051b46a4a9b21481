package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Session resources: files of the Files API placed, read-only, in the
// session's workspace before its first tool runs. The workspace is what
// the tools see as /workspace (a self-hosted executor's workspace
// directory), and every mount path lies inside it.

// resourceStore is what the resource handlers read and write of the store
// themselves (adding and removing a resource goes through the sessions
// service): the file a file resource names, the session whose resources
// are listed, and the sealed tokens of repositories, kept apart from the
// session.
type resourceStore interface {
	fileStore
	GetMemoryStore(ctx context.Context, id string) (ma.MemoryStore, error)
	GetSession(ctx context.Context, id string) (ma.Session, error)
	SetRepositoryToken(ctx context.Context, sessionID, resourceID string, sealed []byte) error
}

type resourceParam struct {
	Type      string  `json:"type"`
	FileID    string  `json:"file_id"`
	MountPath *string `json:"mount_path"`
	// github_repository and memory_store fields, read to refuse them
	// clearly.
	URL           string          `json:"url"`
	Checkout      json.RawMessage `json:"checkout"`
	Token         string          `json:"authorization_token"`
	MemoryStoreID string          `json:"memory_store_id"`
	Access        string          `json:"access"`
	Instructions  *string         `json:"instructions"`
}

// decodeResource validates one resource of a create or add request and
// returns it as stored, and its authorization_token (a
// github_repository's; "" when none), which is never stored with it.
func (s *Server) decodeResource(ctx context.Context, field string, raw json.RawMessage, taken map[string]bool) (ma.SessionResource, string, error) {
	var p resourceParam
	if err := decodeBytes(raw, &p); err != nil {
		return ma.SessionResource{}, "", fieldPrefix(field+": ", err)
	}
	res, err := s.resourceOf(ctx, field, &p, taken)
	if err != nil {
		return res, "", err
	}
	if p.Token != "" {
		if err := checkToken(field+".authorization_token", p.Token); err != nil {
			return res, "", err
		}
	}
	return res, p.Token, nil
}

// checkToken refuses a token that cannot travel in an HTTP header.
func checkToken(field, tok string) error {
	if len(tok) > maxTokenLen {
		return badRequest("%s: at most %d bytes", field, maxTokenLen)
	}
	for _, c := range tok {
		if c < 0x21 || c > 0x7e {
			return badRequest("%s: must be printable ASCII without spaces", field)
		}
	}
	return nil
}

// maxTokenLen bounds an authorization_token.
const maxTokenLen = 4096

// resourceOf validates one decoded resource and returns it as stored.
func (s *Server) resourceOf(ctx context.Context, field string, p *resourceParam, taken map[string]bool) (ma.SessionResource, error) {
	var res ma.SessionResource
	var mount string
	switch p.Type {
	case "file":
		if p.URL != "" || len(p.Checkout) > 0 || p.Token != "" || p.MemoryStoreID != "" || p.Access != "" || p.Instructions != nil {
			return res, badRequest("%s: only type, file_id and mount_path are fields of a file resource", field)
		}
		if p.FileID == "" {
			return res, badRequest("%s.file_id: required", field)
		}
		f, err := s.resourceRows.GetFile(ctx, p.FileID)
		if errors.Is(err, store.ErrNotFound) || err == nil && expired(f.File, time.Now()) {
			return res, notFound("%s.file_id: file %s not found", field, p.FileID)
		}
		if err != nil {
			return res, err
		}
		res = ma.SessionResource{Type: "file", FileID: p.FileID}
		mount = sessions.WorkspaceMount + "/uploads/" + p.FileID
	case "github_repository":
		if p.FileID != "" || p.MemoryStoreID != "" || p.Access != "" || p.Instructions != nil {
			return res, badRequest("%s: only type, url, checkout, authorization_token and mount_path are fields of a github_repository resource", field)
		}
		repo, err := repository(field, p.URL, p.Checkout)
		if err != nil {
			return res, err
		}
		res, mount = repo, sessions.WorkspaceMount+"/"+repoName(repo.URL)
	case "memory_store":
		return s.memoryStoreResource(ctx, field, p)
	case "":
		return res, badRequest("%s.type: required", field)
	default:
		return res, badRequest("%s.type: unknown resource type %q; expected file, github_repository or memory_store", field, p.Type)
	}
	if p.MountPath != nil {
		mount = *p.MountPath
	}
	rel, err := sessions.MountPath(mount)
	if err != nil {
		return res, badRequest("%s.mount_path: %v", field, err)
	}
	if taken[rel] {
		return res, badRequest("%s.mount_path: %s is the mount path of another resource of the session", field, mount)
	}
	taken[rel] = true
	now := ma.Time(time.Now())
	res.ID, res.MountPath, res.CreatedAt, res.UpdatedAt = ids.New(ids.SessionResource), sessions.WorkspaceMount+"/"+rel, now, now
	return res, nil
}

// gitRef is what a branch name may hold: no whitespace, control
// characters or leading dash.
var (
	gitRef = regexp.MustCompile(`^[A-Za-z0-9._/][A-Za-z0-9._/+@-]{0,254}$`)
	gitSHA = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)
)

// repository validates a github_repository's URL and checkout. The clone
// runs in the session's sandbox, through its egress policy, so any http(s)
// git URL is accepted; credentials in the URL are refused (they would be
// stored and shown in clear).
func repository(field, raw string, checkout json.RawMessage) (ma.SessionResource, error) {
	res := ma.SessionResource{Type: "github_repository", URL: raw}
	u, err := url.Parse(raw)
	if raw == "" {
		return res, badRequest("%s.url: required", field)
	}
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return res, badRequest("%s.url: must be an http(s) git URL; got %q", field, raw)
	}
	if u.User != nil {
		return res, badRequest("%s.url: must not hold credentials", field)
	}
	if len(checkout) == 0 || string(checkout) == "null" {
		return res, nil
	}
	var c ma.Checkout
	if err := decodeBytes(checkout, &c); err != nil {
		return res, fieldPrefix(field+".checkout: ", err)
	}
	switch c.Type {
	case "branch":
		if c.SHA != "" || !gitRef.MatchString(c.Name) || strings.Contains(c.Name, "..") {
			return res, badRequest("%s.checkout: a branch checkout needs a valid name; got %q", field, c.Name)
		}
	case "commit":
		if c.Name != "" || !gitSHA.MatchString(c.SHA) {
			return res, badRequest("%s.checkout: a commit checkout needs a hexadecimal sha; got %q", field, c.SHA)
		}
	default:
		return res, badRequest("%s.checkout.type: must be branch or commit; got %q", field, c.Type)
	}
	res.Checkout = &c
	return res, nil
}

// repoName is the directory a repository is cloned into by default: the
// last element of its URL's path, without .git.
func repoName(raw string) string {
	u, _ := url.Parse(raw)
	name := strings.TrimSuffix(path.Base(strings.TrimSuffix(u.Path, "/")), ".git")
	if name == "" || name == "." || name == "/" {
		return "repository"
	}
	return name
}

// decodeResources validates the resources of a session create; tokens
// are the authorization tokens of its repositories, by resource id.
func (s *Server) decodeResources(ctx context.Context, raws []json.RawMessage) (out []ma.Raw, tokens map[string]string, err error) {
	if len(raws) > sessions.MaxResources {
		return nil, nil, badRequest("resources: at most %d resources, got %d", sessions.MaxResources, len(raws))
	}
	out, tokens = []ma.Raw{}, map[string]string{}
	taken := map[string]bool{}
	var mounts memoryMounts
	for i, raw := range raws {
		field := fmt.Sprintf("resources[%d]", i)
		res, tok, err := s.decodeResource(ctx, field, raw, taken)
		if err != nil {
			return nil, nil, err
		}
		if err := mounts.add(field, &res); err != nil {
			return nil, nil, err
		}
		if tok != "" {
			tokens[res.ID] = tok
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, b)
	}
	return out, tokens, nil
}

// storeToken seals a repository's token and stores it apart from the
// session.
func (s *Server) storeToken(ctx context.Context, sessionID, resourceID, tok string) error {
	keys := s.cfg.Vaults.Keyring
	if keys == nil {
		return badRequest("authorization_token: this server has no master key to seal tokens with")
	}
	sealed, err := keys.Seal([]byte(tok), sessions.RepositoryTokenAD(sessionID, resourceID))
	if err != nil {
		return err
	}
	return s.resourceRows.SetRepositoryToken(ctx, sessionID, resourceID, sealed)
}

func (s *Server) resourceRoutes() {
	s.handle("GET /v1/sessions/{id}/resources", smallBody, s.listResources)
	s.handle("POST /v1/sessions/{id}/resources", smallBody, s.addResource)
	s.handle("GET /v1/sessions/{id}/resources/{rid}", smallBody, s.getResource)
	s.handle("POST /v1/sessions/{id}/resources/{rid}", smallBody, s.updateResource)
	s.handle("DELETE /v1/sessions/{id}/resources/{rid}", smallBody, noBody(s.deleteResource))
}

func (s *Server) listResources(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	limit, err := q.limit(20, 1000)
	if err != nil {
		return err
	}
	after := int64(0)
	if page := q.str("page"); page != "" {
		c, err := decodeCursor(page, "asc")
		if err != nil {
			return err
		}
		after = c.Pos
	}
	sess, err := s.resourceRows.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	all, err := sessions.Resources(&sess)
	if err != nil {
		return err
	}
	page := ma.Page[ma.SessionResource]{Data: []ma.SessionResource{}}
	for i := int(after); i < len(all) && len(page.Data) < limit; i++ {
		page.Data = append(page.Data, all[i])
		if len(page.Data) == limit && i+1 < len(all) {
			page.NextPage = cursor{Pos: int64(i + 1), Order: "asc"}.encode()
		}
	}
	writeJSON(w, page)
	return nil
}

func (s *Server) findResource(r *http.Request) (ma.SessionResource, error) {
	sess, err := s.resourceRows.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return ma.SessionResource{}, err
	}
	all, err := sessions.Resources(&sess)
	if err != nil {
		return ma.SessionResource{}, err
	}
	for _, res := range all {
		if res.ID == r.PathValue("rid") {
			return res, nil
		}
	}
	return ma.SessionResource{}, notFound("resource %s of session %s not found", r.PathValue("rid"), sess.ID)
}

func (s *Server) getResource(w http.ResponseWriter, r *http.Request) error {
	res, err := s.findResource(r)
	if err != nil {
		return err
	}
	writeJSON(w, res)
	return nil
}

func (s *Server) updateResource(w http.ResponseWriter, r *http.Request) error {
	res, err := s.findResource(r)
	if err != nil {
		return err
	}
	var p struct {
		Token *string `json:"authorization_token"`
	}
	if err := decode(r, &p); err != nil {
		return err
	}
	if res.Type == "github_repository" {
		if p.Token == nil || *p.Token == "" {
			return badRequest("authorization_token: required")
		}
		if err := checkToken("authorization_token", *p.Token); err != nil {
			return err
		}
		if err := s.storeToken(r.Context(), r.PathValue("id"), res.ID, *p.Token); err != nil {
			return err
		}
		if s.cfg.Lifecycle != nil {
			s.cfg.Lifecycle.RepositoryTokenChanged(r.Context(), r.PathValue("id"), res.ID)
		}
		writeJSON(w, res)
		return nil
	}
	return badRequest("resource %s: a %s resource has nothing to update (authorization_token is for github_repository resources)", res.ID, res.Type)
}

func (s *Server) addResource(w http.ResponseWriter, r *http.Request) error {
	var raw json.RawMessage
	if err := decode(r, &raw); err != nil {
		return err
	}
	// The resource is checked on its own here, against the session by
	// the sessions service.
	res, tok, err := s.decodeResource(r.Context(), "resource", raw, map[string]bool{})
	if err != nil {
		return err
	}
	if res.Type == "memory_store" {
		return badRequest("resource.type: a memory_store resource is attached when the session is created, not added later")
	}
	if tok != "" {
		return badRequest("resource.authorization_token: a private repository's token is given when the session is created (the session's sandbox gets its credentials then)")
	}
	if err := s.cfg.Sessions.AddResource(r.Context(), r.PathValue("id"), res); err != nil {
		return sessionError(err)
	}
	writeJSON(w, res)
	return nil
}

func (s *Server) deleteResource(w http.ResponseWriter, r *http.Request) error {
	rid := r.PathValue("rid")
	if err := s.cfg.Sessions.RemoveResource(r.Context(), r.PathValue("id"), rid); err != nil {
		return sessionError(err)
	}
	if err := s.resourceRows.SetRepositoryToken(r.Context(), r.PathValue("id"), rid, nil); err != nil {
		return err
	}
	writeJSON(w, ma.Deleted{ID: rid, Type: "session_resource_deleted"})
	return nil
}
