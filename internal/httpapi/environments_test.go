package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestEnvironmentPackagesValidated: packages reins cannot install, and
// specs that are not a name and version, are refused on create and on
// update with a 400 naming them.
func TestEnvironmentPackagesValidated(t *testing.T) {
	f := newVaultFixture(t)
	status, msg := f.raw(t, "POST", "/v1/environments", `{"name":"apt","config":{"type":"cloud","packages":{"apt":["curl"]}}}`)
	if status != http.StatusBadRequest || !strings.Contains(msg, "config.packages.apt: reins cannot install apt packages") {
		t.Errorf("apt: %d %q", status, msg)
	}
	status, msg = f.raw(t, "POST", "/v1/environments", `{"name":"ok","config":{"type":"cloud","packages":{"pip":["requests==2.31.0"]}}}`)
	if status != http.StatusOK {
		t.Fatalf("pip: %d %q", status, msg)
	}
	var env struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(f.bodies.String()[strings.LastIndex(f.bodies.String(), `{"id"`):]), &env)
	if env.ID == "" {
		t.Fatalf("no environment id in %s", f.bodies.String())
	}
	status, msg = f.raw(t, "POST", "/v1/environments/"+env.ID, `{"config":{"type":"cloud","packages":{"pip":["--index-url=http://evil"]}}}`)
	if status != http.StatusBadRequest || !strings.Contains(msg, "config.packages.pip[0]") {
		t.Errorf("update with an option for a spec: %d %q", status, msg)
	}
}
