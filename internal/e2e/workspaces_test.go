package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// wsKit is what one developer made in its workspace.
type wsKit struct {
	ws, agent, env, session, file, vault string
	client                               anthropic.Client
}

// TestWorkspacesKeepApart: with the official SDK, an admin makes two
// workspaces, a developer key in each and a read_only key; each developer
// makes an agent, environment, session, file and vault that the other
// neither gets (404) nor lists; the read_only key reads and cannot write;
// a developer naming the other workspace in anthropic-workspace-id is
// refused; the admin finds the changes in the audit log with their actors.
func TestWorkspacesKeepApart(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	admin := s.client
	var kits [2]*wsKit
	for i, name := range []string{"team-a", "team-b"} {
		w, err := admin.Organization.Workspaces.New(ctx, anthropic.OrganizationWorkspaceNewParams{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if w.ID == "" || w.Name != name || string(w.Type) != "workspace" {
			t.Fatalf("workspace %+v", w)
		}
		kits[i] = s.developer(t, w.ID, "dev-"+name, "developer")
	}
	page, err := admin.Organization.Workspaces.List(ctx, anthropic.OrganizationWorkspaceListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) < 2 {
		t.Fatalf("workspaces list: %d, want the 2 made (and the default)", len(page.Data))
	}
	for i, k := range kits {
		k.makeAll(t, s)
		other := kits[1-i]
		other.cannotSee(t, k)
		// The admin sees each with the header, and not without it.
		hdr := option.WithHeader("anthropic-workspace-id", k.ws)
		if _, err := admin.Beta.Agents.Get(ctx, k.agent, anthropic.BetaAgentGetParams{}, hdr); err != nil {
			t.Errorf("admin with the header: %v", err)
		}
		_, err := admin.Beta.Agents.Get(ctx, k.agent, anthropic.BetaAgentGetParams{})
		apiErr(t, err, 404, "not_found_error")
		// Its own header is fine; the other's is refused naming both.
		if _, err := k.client.Beta.Agents.Get(ctx, k.agent, anthropic.BetaAgentGetParams{}, hdr); err != nil {
			t.Errorf("developer with its own header: %v", err)
		}
		_, err = k.client.Beta.Agents.Get(ctx, k.agent, anthropic.BetaAgentGetParams{}, option.WithHeader("anthropic-workspace-id", other.ws))
		apiErr(t, err, 403, "permission_error")
		if !strings.Contains(err.Error(), k.ws) || !strings.Contains(err.Error(), other.ws) {
			t.Errorf("the refusal does not name both workspaces: %v", err)
		}
	}

	// read_only in team-a: reads work, writes are refused.
	ro := s.developer(t, kits[0].ws, "ro-team-a", "read_only")
	if _, err := ro.client.Beta.Agents.Get(ctx, kits[0].agent, anthropic.BetaAgentGetParams{}); err != nil {
		t.Errorf("read_only get: %v", err)
	}
	if p, err := ro.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{}); err != nil || len(p.Data) != 1 {
		t.Errorf("read_only sessions list: %v, %v", p, err)
	}
	_, err = ro.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "no", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}})
	apiErr(t, err, 403, "permission_error")
	_, err = ro.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "no"})
	apiErr(t, err, 403, "permission_error")
	// Nor can a developer reach the Admin API.
	_, err = kits[0].client.Organization.Workspaces.New(ctx, anthropic.OrganizationWorkspaceNewParams{Name: "no"})
	apiErr(t, err, 403, "permission_error")

	// The admin's key list shows roles and scopes; the audit log the changes.
	keys, err := admin.Organization.APIKeys.List(ctx, anthropic.OrganizationAPIKeyListParams{WorkspaceID: anthropic.String(kits[1].ws)})
	if err != nil || len(keys.Data) != 1 || keys.Data[0].Scope.WorkspaceID != kits[1].ws {
		t.Fatalf("keys of %s: %+v, %v", kits[1].ws, keys, err)
	}
	var audit struct {
		Data []struct {
			Action string `json:"action"`
			Actor  struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"actor"`
			Target struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"target"`
			WorkspaceID string `json:"workspace_id"`
		} `json:"data"`
	}
	if _, err := call(s.url, s.key, "GET", "/v1/organizations/audit_log?limit=1000", nil, &audit); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range audit.Data {
		seen = append(seen, e.Action)
		if e.Action == "vault.created" && e.Target.ID == kits[1].vault {
			if e.Actor.Type != "api_key" || !strings.HasPrefix(e.Actor.ID, "key_") || e.WorkspaceID != kits[1].ws {
				t.Errorf("vault.created entry: %+v", e)
			}
		}
	}
	for _, want := range []string{"workspace.created", "api_key.created", "vault.created"} {
		if !slices.Contains(seen, want) {
			t.Errorf("audit log lacks %s: %v", want, seen)
		}
	}
	// A developer cannot read it.
	if st, _ := call(s.url, devKey(kits[0]), "GET", "/v1/organizations/audit_log", nil, nil); st != http.StatusForbidden {
		t.Errorf("developer audit log: %d, want 403", st)
	}
}

// devKeys remembers each kit's raw key for plain HTTP calls.
var devKeys = map[*wsKit]string{}

func devKey(k *wsKit) string { return devKeys[k] }

// developer makes a key of role in workspace ws and a client with it.
func (s *server) developer(t *testing.T, ws, name, role string) *wsKit {
	t.Helper()
	var key struct{ ID, Key, Role, WorkspaceID string }
	if _, err := call(s.url, s.key, "POST", "/v1/api_keys", map[string]string{"name": name, "role": role, "workspace_id": ws}, &key); err != nil {
		t.Fatal(err)
	}
	k := &wsKit{ws: ws, client: anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(key.Key), option.WithMaxRetries(0))}
	devKeys[k] = key.Key
	var me struct {
		ID, Role    string
		WorkspaceID string `json:"workspace_id"`
	}
	if _, err := call(s.url, key.Key, "GET", "/v1/api_keys/me", nil, &me); err != nil || me.ID != key.ID || me.Role != role || me.WorkspaceID != ws {
		t.Fatalf("/v1/api_keys/me: %+v, %v", me, err)
	}
	return k
}

// makeAll makes an agent, environment, session, file and vault with k.
func (k *wsKit) makeAll(t *testing.T, s *server) {
	t.Helper()
	ctx := context.Background()
	a, err := k.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "agent", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := k.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "env " + k.ws})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := k.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: e.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := k.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("hello\n"), "hello.txt", "text/plain")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := k.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "vault " + k.ws})
	if err != nil {
		t.Fatal(err)
	}
	k.agent, k.env, k.session, k.file, k.vault = a.ID, e.ID, sess.ID, f.ID, v.ID
}

// cannotSee checks that k's client neither gets nor lists o's resources.
func (k *wsKit) cannotSee(t *testing.T, o *wsKit) {
	t.Helper()
	ctx := context.Background()
	c := k.client.Beta
	_, err := c.Agents.Get(ctx, o.agent, anthropic.BetaAgentGetParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = c.Environments.Get(ctx, o.env, anthropic.BetaEnvironmentGetParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = c.Sessions.Get(ctx, o.session, anthropic.BetaSessionGetParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = c.Files.GetMetadata(ctx, o.file, anthropic.BetaFileGetMetadataParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = c.Vaults.Get(ctx, o.vault, anthropic.BetaVaultGetParams{})
	apiErr(t, err, 404, "not_found_error")
	agents, err := c.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents.Data {
		if a.ID == o.agent {
			t.Errorf("%s lists %s's agent %s", k.ws, o.ws, a.ID)
		}
	}
	vaults, err := c.Vaults.List(ctx, anthropic.BetaVaultListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vaults.Data {
		if v.ID == o.vault {
			t.Errorf("%s lists %s's vault %s", k.ws, o.ws, v.ID)
		}
	}
	sessions, err := c.Sessions.List(ctx, anthropic.BetaSessionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range sessions.Data {
		if x.ID == o.session {
			t.Errorf("%s lists %s's session %s", k.ws, o.ws, x.ID)
		}
	}
}
