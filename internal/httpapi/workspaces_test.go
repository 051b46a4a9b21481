package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
)

// wsFixture is a server on a real SQLite store with a bootstrap key.
type wsFixture struct {
	url string
	st  store.Store
}

func newWSFixture(t *testing.T) *wsFixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mk, err := vault.LoadKey("", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := vault.NewKeyring(mk)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(New(Config{Store: st, Auth: &Authenticator{Keys: st, Bootstrap: "sk-boot", CacheTTL: -1}, Vaults: VaultConfig{Keyring: keys}}))
	t.Cleanup(hs.Close)
	return &wsFixture{url: hs.URL, st: st}
}

// do sends a request with key and the workspace header (if ws != "") and
// returns the status and body.
func (f *wsFixture) do(t *testing.T, key, ws, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	req.Header.Set("x-api-key", key)
	req.Header.Set("content-type", "application/json")
	if ws != "" {
		req.Header.Set(WorkspaceHeader, ws)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// key makes a key of role in ws through the API and returns it.
func (f *wsFixture) key(t *testing.T, role, ws string) (key, id string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": "key " + role, "role": role, "workspace_id": ws})
	st, out := f.do(t, "sk-boot", "", "POST", "/v1/api_keys", string(body))
	if st != 200 {
		t.Fatalf("create %s key: %d %s", role, st, out)
	}
	var k struct{ ID, Key string }
	json.Unmarshal([]byte(out), &k)
	return k.Key, k.ID
}

func (f *wsFixture) workspace(t *testing.T, name string) string {
	t.Helper()
	st, out := f.do(t, "sk-boot", "", "POST", "/v1/organizations/workspaces", `{"name":"`+name+`"}`)
	if st != 200 {
		t.Fatalf("create workspace: %d %s", st, out)
	}
	var w struct{ ID string }
	json.Unmarshal([]byte(out), &w)
	return w.ID
}

func TestWorkspaceHeaderAndRoles(t *testing.T) {
	f := newWSFixture(t)
	a, b := f.workspace(t, "a"), f.workspace(t, "b")
	dev, _ := f.key(t, store.RoleDeveloper, a)
	ro, _ := f.key(t, store.RoleReadOnly, a)
	admin, _ := f.key(t, "", "")
	cases := []struct {
		name, key, ws, method, path, body string
		status                            int
		says                              string
	}{
		{"admin without header", admin, "", "GET", "/v1/agents", "", 200, ""},
		{"admin with header", admin, b, "GET", "/v1/agents", "", 200, ""},
		{"admin unknown workspace", admin, "wrkspc_nope", "GET", "/v1/agents", "", 404, "wrkspc_nope"},
		{"developer own header", dev, a, "GET", "/v1/agents", "", 200, ""},
		{"developer other header", dev, b, "GET", "/v1/agents", "", 403, b},
		{"developer admin route", dev, "", "GET", "/v1/organizations/workspaces", "", 403, "admin"},
		{"developer key list", dev, "", "GET", "/v1/api_keys", "", 403, "admin"},
		{"developer me", dev, "", "GET", "/v1/api_keys/me", "", 200, a},
		{"read_only get", ro, "", "GET", "/v1/agents", "", 200, ""},
		{"read_only post", ro, "", "POST", "/v1/vaults", `{"display_name":"x"}`, 403, "read_only"},
		{"read_only delete", ro, "", "DELETE", "/v1/agents/agent_x", "", 403, "read_only"},
		{"default not archivable", admin, "", "POST", "/v1/organizations/workspaces/" + store.DefaultWorkspace + "/archive", "", 400, "default"},
		{"developer needs workspace", admin, "", "POST", "/v1/api_keys", `{"name":"x","role":"developer"}`, 400, "workspace_id"},
		{"unknown field", admin, "", "POST", "/v1/organizations/workspaces", `{"name":"x","color":"red"}`, 400, "color"},
	}
	for _, c := range cases {
		st, out := f.do(t, c.key, c.ws, c.method, c.path, c.body)
		if st != c.status || !strings.Contains(out, c.says) {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, st, out, c.status, c.says)
		}
	}
	// An archived workspace is refused in the header; an inactive key is
	// refused like a revoked one.
	if st, out := f.do(t, admin, "", "POST", "/v1/organizations/workspaces/"+b+"/archive", ""); st != 200 {
		t.Fatalf("archive: %d %s", st, out)
	}
	if st, out := f.do(t, admin, b, "GET", "/v1/agents", ""); st != 400 || !strings.Contains(out, "archived") {
		t.Errorf("archived workspace header: %d %s", st, out)
	}
	_, devID := f.key(t, store.RoleDeveloper, a)
	if st, out := f.do(t, admin, "", "POST", "/v1/organizations/api_keys/"+devID, `{"status":"inactive"}`); st != 200 {
		t.Fatalf("deactivate: %d %s", st, out)
	}
	devKeys, _ := f.st.ListAPIKeys(context.Background())
	for _, k := range devKeys {
		if k.ID == devID && k.Status != store.KeyInactive {
			t.Errorf("status %q, want inactive", k.Status)
		}
	}
}

func TestAuditLogRecordsActors(t *testing.T) {
	f := newWSFixture(t)
	a := f.workspace(t, "a")
	dev, devID := f.key(t, store.RoleDeveloper, a)
	if st, out := f.do(t, dev, "", "POST", "/v1/vaults", `{"display_name":"v"}`); st != 200 {
		t.Fatalf("vault: %d %s", st, out)
	}
	time.Sleep(time.Millisecond)
	st, out := f.do(t, "sk-boot", "", "GET", "/v1/organizations/audit_log?action=vault.created", "")
	if st != 200 {
		t.Fatalf("audit log: %d %s", st, out)
	}
	var page struct {
		Data []struct {
			Action      string
			Actor       struct{ Type, ID string }
			WorkspaceID string `json:"workspace_id"`
		}
	}
	json.Unmarshal([]byte(out), &page)
	if len(page.Data) != 1 || page.Data[0].Actor.ID != devID || page.Data[0].Actor.Type != "api_key" || page.Data[0].WorkspaceID != a {
		t.Fatalf("audit log: %s", out)
	}
	_, out = f.do(t, "sk-boot", "", "GET", "/v1/organizations/audit_log?action=workspace.created", "")
	if !strings.Contains(out, `"type":"bootstrap"`) {
		t.Errorf("workspace.created by the bootstrap key: %s", out)
	}
}
