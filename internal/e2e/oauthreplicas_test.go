package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/mcptest"
	"github.com/reinsdev/reins/internal/pgtest"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestReplicasRefreshARotatingTokenOnce: two servers on one PostgreSQL
// database validate one mcp_oauth credential at once; the MCP server
// rejects its access token, so both refresh it. The token endpoint rotates
// refresh tokens and refuses a spent one: it is called once, and both
// validations end valid with the one new token.
func TestReplicasRefreshARotatingTokenOnce(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	replica := func(id string) *server {
		return startWith(t, options{}, func(c *app.Config) { c.DatabaseURL, c.ReplicaID = dsn, id })
	}
	replicas := []*server{replica("replica-a"), replica("replica-b")}
	mcpSrv := mcptest.Start(t, mcptest.Options{Token: "at-2"})
	endpoint := mcptest.StartTokenEndpoint(t, 2*time.Second)
	a := replicas[0]
	var v struct{ ID string }
	if _, err := call(a.url, a.key, "POST", "/v1/vaults", map[string]any{"display_name": "oauth"}, &v); err != nil {
		t.Fatal(err)
	}
	var cred struct{ ID string }
	if _, err := call(a.url, a.key, "POST", "/v1/vaults/"+v.ID+"/credentials", map[string]any{"auth": map[string]any{
		"type": "mcp_oauth", "mcp_server_url": mcpSrv.URL(), "access_token": "at-1", "expires_at": ma.Time(time.Now().Add(time.Hour)),
		"refresh": map[string]any{"client_id": "reins", "refresh_token": "rt-1", "token_endpoint": endpoint.URL(),
			"token_endpoint_auth": map[string]any{"type": "none"}}}}, &cred); err != nil {
		t.Fatal(err)
	}
	path := "/v1/vaults/" + v.ID + "/credentials/" + cred.ID + "/mcp_oauth_validate"
	got := make([]ma.CredentialValidation, 4)
	var wg sync.WaitGroup
	for i := range got {
		s := replicas[i%2]
		wg.Go(func() {
			if _, err := call(s.url, s.key, "POST", path, nil, &got[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, g := range got {
		if g.Status != "valid" || g.Refresh == nil || g.Refresh.Status != "succeeded" {
			t.Errorf("validation %d on replica %d: status %q, refresh %+v", i, i%2, g.Status, g.Refresh)
		}
	}
	if uses, refused := endpoint.Uses(); uses != 1 || len(refused) != 0 {
		t.Fatalf("the token endpoint got %d requests and refused %q; want one refresh", uses, refused)
	}
}
